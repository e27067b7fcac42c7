/*
 * shm_segment.c - the shared-memory segment of a shm link (shm_link.h
 * gives its layout): its name, creation by rank 0, opening by the other
 * ranks, the checks of its header and size, the claim of each rank's
 * control line and the wait until every rank joined, and its unmapping.
 *
 * Rank 0 creates a POSIX shared-memory segment named after the job
 * (ccol__shm_path), every other rank maps it, claims its control line and
 * waits until all ranks have joined; rank 0 then removes the name, so a
 * crash later leaves nothing behind.
 *
 * A process outside the job that truncates the segment would make the
 * next access to the lost pages a SIGBUS: every rank keeps the segment
 * open and checks its size (ccol__shm_check_size) when an operation
 * starts, every millisecond while it spins and after every sleep, and once
 * it is short touches nothing in it again. The check costs an fstat (0.5
 * us here), hence at most one per millisecond on the hot path; a
 * truncation between a check and the next access faults, and the SIGBUS
 * guard (shm_guard.c) turns the fault into a mark the next check reports.
 *
 * A segment left by a crashed job (its rank 0 dead) is replaced by the
 * next rank 0 of the same name; ranks that opened the stale one notice
 * the replacement (another inode behind the name, or a dead creator) and
 * start over. A segment whose rank 0 is alive is never taken over.
 */
#define _GNU_SOURCE
#include "shm_link.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SEG_MAGIC 0x4D485343u /* "CSHM" */
#define SEG_VERSION 6u /* 3: slots carry whole labels, 4: a checksum,
                           5: the checksum covers the sequence number,
                           6: the header says when the job formed */

typedef struct seg_hdr {
    _Atomic uint32_t magic;  /* SEG_MAGIC once the segment is ready */
    uint32_t version;        /* SEG_VERSION */
    uint32_t size;           /* world size */
    uint32_t cap;            /* ring capacity */
    uint32_t threshold;      /* tree shape every rank must share */
    uint32_t fanout;
    uint64_t token;          /* job token digest */
    _Atomic int32_t creator; /* pid of rank 0 */
    _Atomic uint32_t formed; /* 1 once a rank saw every rank joined */
} seg_hdr;

_Static_assert(sizeof(seg_hdr) <= CCOL__LINE, "the header is line 0");


/* ---- layout ---- */

/* The segment header, line 0. */
static seg_hdr *
hdr_of(const ccol__shm_link *l)
{
    return (seg_hdr *)(void *)l->map;
}

/* Rank r's control line, the board's first part after the header. */
static ccol__rank_ctl *
ctl_of(const ccol__shm_link *l, int r)
{
    return (ccol__rank_ctl *)(void *)(l->map +
                                      CCOL__LINE * (size_t)(1 + r));
}

size_t
ccol__shm_rings_off(int size, bool slots)
{
    return CCOL__LINE + ccol__slots_bytes(size, slots);
}

/* Where the rings of cfg's job start: slots within the tree threshold
 * only (above it every operation takes the rings). */
static size_t
rings_at(const ccol__link_cfg *cfg)
{
    return ccol__shm_rings_off(cfg->id.size,
                               cfg->id.size <= cfg->threshold);
}

/* The whole segment: header, board and two rings per rank other than
 * 0. */
static size_t
seg_bytes(const ccol__link_cfg *cfg, uint32_t cap)
{
    size_t stride = sizeof(ccol__shm_ring) + cap;

    return rings_at(cfg) + stride * (size_t)(2 * (cfg->id.size - 1));
}

/* Segment names live in one flat namespace (/dev/shm): the user id keeps
 * users apart, the job name is cleaned so it cannot name a path, and a
 * hash keeps long names distinct after shortening. */
/* A character a segment's job name keeps as it is (others become '_'). */
static bool
name_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
}

void
ccol__shm_path(const char *name, char *out, size_t outlen)
{
    char clean[64];
    size_t n = strlen(name), i;

    for (i = 0; i < n && i < sizeof clean - 1; i++)
        clean[i] = name_char(name[i]) ? name[i] : '_';
    clean[i] = '\0';
    if (n >= sizeof clean - 1)
        snprintf(out, outlen, "/ccol-%u-%.40s-%016" PRIx64,
                 (unsigned)getuid(), clean, ccol__hash_str(name));
    else
        snprintf(out, outlen, "/ccol-%u-%s", (unsigned)getuid(), clean);
}

/* With a job token the segment's name ends in 16 hex digits of an HMAC
 * of it: another local user cannot tell the name in advance to squat it
 * (the digest gives nothing of the token away). */
void
ccol__shm_job_path(const char *name, const char *token, char *out,
                   size_t outlen)
{
    static const char what[] = "ccol shm segment name";
    char full[128];
    uint8_t mac[32];

    snprintf(full, sizeof full, "%.100s", name);
    if (token != NULL) {
        ccol__hmac_sha256(token, strlen(token), what, sizeof what - 1, mac);
        snprintf(full + strlen(full), sizeof full - strlen(full),
                 "-%016" PRIx64, ccol__ld64(mac));
    }
    ccol__shm_path(full, out, outlen);
}

/* ---- its size ---- */

ccol_status
ccol__shm_check_size(ccol__shm_link *l, int64_t now, ccol__err *err)
{
    struct stat sb;

    if (l->fd < 0)
        return CCOL_OK;
    if (!l->board.cut && l->guard > 0 && ccol__shm_guard_cut(l->guard - 1)) {
        l->board.cut = true; /* a fault found it cut (and it stays so) */
        l->cut_to = fstat(l->fd, &sb) == 0 ? (int64_t)sb.st_size : 0;
    }
    if (!l->board.cut) {
        if (now != 0 && now - l->sized_at < CCOL__SHM_SIZE_NS)
            return CCOL_OK;
        l->sized_at = now != 0 ? now : ccol__now_ns();
        if (fstat(l->fd, &sb) != 0 || (size_t)sb.st_size >= l->bytes)
            return CCOL_OK;
        l->board.cut = true;
        l->cut_to = (int64_t)sb.st_size;
    }
    return ccol__seterr(err, CCOL_ERR_IO,
                        "the shared memory segment %s was truncated to %"
                        PRId64 " bytes (expected %zu) by a process outside "
                        "the job",
                        l->path, l->cut_to, l->bytes);
}

/* Is process pid alive? A zombie counts as dead (its pidfd is readable). */
static bool
pid_alive(int pid)
{
    int fd;
    bool alive;
    struct pollfd p;

    if (pid <= 0)
        return false;
    fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0)
        return !(kill(pid, 0) != 0 && errno == ESRCH);
    p.fd = fd;
    p.events = POLLIN;
    p.revents = 0;
    alive = poll(&p, 1, 0) == 0; /* readable once the process exited */
    close(fd);
    return alive;
}

/* Unmaps the segment, if mapped, and closes it. */
void
ccol__shm_unmap(ccol__shm_link *l)
{
    if (l->guard > 0)
        ccol__shm_guard_remove(l->guard - 1);
    l->guard = 0;
    if (l->map != NULL)
        munmap(l->map, l->bytes);
    if (l->fd >= 0)
        close(l->fd);
    l->map = NULL;
    l->bytes = 0;
    l->fd = -1;
}

/* A segment is this job's only if this user made it and no one else may
 * write it: a name another local user created first (any mode), or one
 * others may write, is refused naming its owner, never joined (its
 * contents would be theirs to forge). */
static ccol_status
check_owner(const char *path, const struct stat *sb, ccol__err *err)
{
    if (sb->st_uid == geteuid() && (sb->st_mode & 0077) == 0)
        return CCOL_OK;
    return ccol__seterr(err, CCOL_ERR_BUSY,
                        "shm segment %s is not this user's own: it belongs "
                        "to uid %u with mode %04o (this process is uid %u "
                        "and makes its segments 0600); another local user "
                        "may have taken the job's name, so it is refused. "
                        "Remove it or give the job another name or "
                        "MASTER_PORT",
                        path, (unsigned)sb->st_uid,
                        (unsigned)(sb->st_mode & 07777),
                        (unsigned)geteuid());
}

/* shm_open refused the name (EACCES): another user's segment, named by
 * its owner as check_owner would (POSIX shm names live in /dev/shm). */
static ccol_status
refused_open(const char *path, ccol__err *err)
{
    char file[300];
    struct stat sb;
    int e = errno;

    snprintf(file, sizeof file, "/dev/shm%s", path);
    if (stat(file, &sb) == 0 && check_owner(path, &sb, err) != CCOL_OK)
        return CCOL_ERR_BUSY;
    return ccol__seterr(err, CCOL_ERR_IO, "cannot open shm segment %s: %s",
                        path, strerror(e));
}

/* Maps `bytes` of fd after checking who owns it; remembers the inode
 * behind the name. */
static ccol_status
map_fd(ccol__shm_link *l, int fd, size_t bytes, ccol__err *err)
{
    struct stat sb;
    void *p;
    ccol_status st;

    if (fstat(fd, &sb) != 0)
        return ccol__seterr(err, CCOL_ERR_IO, "shm segment %s: fstat: %s",
                            l->path, strerror(errno));
    if ((st = check_owner(l->path, &sb, err)) != CCOL_OK)
        return st;
    p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return ccol__seterr(err, CCOL_ERR_IO,
                            "shm segment %s: cannot map %zu bytes: %s",
                            l->path, bytes, strerror(errno));
    l->map = p;
    l->bytes = bytes;
    l->ino = sb.st_ino;
    l->guard = 1 + ccol__shm_guard_add(p, bytes);
    return CCOL_OK;
}

/* The magic and rank 0's pid from the header of the segment open as fd
 * (both 0 when it is too short to hold them). */
static void
read_creator(int fd, uint32_t *magic, int *creator)
{
    struct stat sb;

    *magic = 0;
    *creator = 0;
    if (fstat(fd, &sb) == 0 && (size_t)sb.st_size >= CCOL__LINE) {
        seg_hdr *h = mmap(NULL, CCOL__LINE, PROT_READ, MAP_SHARED, fd, 0);
        if (h != MAP_FAILED) {
            *magic = atomic_load(&h->magic);
            *creator = atomic_load(&h->creator);
            munmap(h, CCOL__LINE);
        }
    }
}

bool
ccol__shm_forget(const char *name, const char *token)
{
    char path[160];
    struct stat sb;
    uint32_t magic;
    int creator, fd;
    bool stale = false;

    ccol__shm_job_path(name, token, path, sizeof path);
    fd = shm_open(path, O_RDONLY, 0);
    if (fd < 0)
        return false;
    if (fstat(fd, &sb) == 0 && sb.st_uid == geteuid()) {
        read_creator(fd, &magic, &creator);
        stale = creator <= 0 || !pid_alive(creator);
    }
    close(fd);
    return stale && shm_unlink(path) == 0;
}

/* True when `prefix` is 1 to 32 characters a segment's job name keeps
 * unchanged (name_char). */
static bool
sweep_prefix_ok(const char *prefix)
{
    size_t n = prefix != NULL ? strlen(prefix) : 0;

    if (n < 1 || n > 32)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!name_char(prefix[i]))
            return false;
    return true;
}

/* Removes the segment /`name` when it is this user's, ready, and its
 * rank 0 is gone. */
static bool
sweep_one(const char *name)
{
    char path[300];
    struct stat sb;
    uint32_t magic;
    int creator, fd;
    bool gone = false;

    snprintf(path, sizeof path, "/%s", name);
    fd = shm_open(path, O_RDONLY | O_NOFOLLOW, 0);
    if (fd < 0)
        return false;
    if (fstat(fd, &sb) == 0 && sb.st_uid == geteuid() &&
        S_ISREG(sb.st_mode)) {
        read_creator(fd, &magic, &creator);
        gone = magic == SEG_MAGIC && creator > 0 && !pid_alive(creator);
    }
    close(fd);
    return gone && shm_unlink(path) == 0;
}

unsigned
ccol_shm_sweep(const char *prefix)
{
    char start[64];
    unsigned removed = 0;
    struct dirent *de;
    DIR *d;

    if (!sweep_prefix_ok(prefix))
        return 0;
    snprintf(start, sizeof start, "ccol-%u-%s", (unsigned)getuid(), prefix);
    if ((d = opendir("/dev/shm")) == NULL)
        return 0;
    while ((de = readdir(d)) != NULL)
        if (strncmp(de->d_name, start, strlen(start)) == 0 &&
            sweep_one(de->d_name))
            removed++;
    closedir(d);
    return removed;
}

/* Rank 0, name taken: a live job keeps it (BUSY), a dead one's is removed.
 * Returns OK when the caller may try to create the segment again. */
static ccol_status
clear_stale(ccol__shm_link *l, const ccol__link_cfg *cfg, ccol__err *err)
{
    int fd = shm_open(l->path, O_RDWR, 0);
    struct stat sb;
    int creator = 0;
    uint32_t magic = 0;

    if (fd < 0 && errno == EACCES)
        return refused_open(l->path, err);
    if (fd < 0)
        return CCOL_OK; /* gone meanwhile */
    if (fstat(fd, &sb) == 0 && check_owner(l->path, &sb, err) != CCOL_OK) {
        close(fd);
        return CCOL_ERR_BUSY; /* never read, never removed */
    }
    read_creator(fd, &magic, &creator);
    close(fd);
    if (magic == SEG_MAGIC && pid_alive(creator))
        return ccol__seterr(err, CCOL_ERR_BUSY,
                            "shm segment %s belongs to a job that is still "
                            "running (its rank 0 is pid %d); give this job "
                            "another name or MASTER_PORT",
                            l->path, creator);
    ccol__log(CCOL_LOG_INFO, "comm", "rank 0/%d: removing the stale shm "
              "segment %s (its rank 0, pid %d, is gone)", cfg->id.size,
              l->path, creator);
    shm_unlink(l->path);
    return CCOL_OK;
}

/* Rank 0 creates and initialises the segment. */
static ccol_status
create_seg(ccol__shm_link *l, const ccol__link_cfg *cfg, ccol__err *err)
{
    size_t bytes = seg_bytes(cfg, l->cap);
    ccol_status st;
    seg_hdr *h;
    int fd = -1;

    for (int attempt = 0; attempt < 4 && fd < 0; attempt++) {
        fd = shm_open(l->path, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd < 0 && errno != EEXIST)
            return ccol__seterr(err, CCOL_ERR_IO,
                                "cannot create shm segment %s: %s", l->path,
                                strerror(errno));
        if (fd < 0 && (st = clear_stale(l, cfg, err)) != CCOL_OK)
            return st;
    }
    if (fd < 0)
        return ccol__seterr(err, CCOL_ERR_BUSY,
                            "cannot create shm segment %s: the name keeps "
                            "being taken", l->path);
    l->named = true;
    /* Reserve the pages every rank uses now (header, control lines,
     * slots): a full /dev/shm must be an error here, not a SIGBUS when
     * they are first touched. Each rank reserves its own rings as it
     * joins (reserve_rings), so a world size alone (a hostile or mistyped
     * WORLD_SIZE) costs no memory until ranks actually come. */
    if (ftruncate(fd, (off_t)bytes) != 0 ||
        (errno = posix_fallocate(
             fd, 0, (off_t)rings_at(cfg))) !=
            0) {
        st = ccol__seterr(err, CCOL_ERR_IO,
                          "cannot size shm segment %s to %zu bytes: %s "
                          "(is /dev/shm full?)",
                          l->path, bytes, strerror(errno));
        close(fd);
        shm_unlink(l->path); /* nothing of it may stay behind */
        l->named = false;
        return st;
    }
    st = map_fd(l, fd, bytes, err);
    if (st != CCOL_OK) {
        close(fd);
        return st;
    }
    l->fd = fd; /* kept for the size checks */
    l->reap = ccol__shm_reap_add(l->path, l->ino);
    h = hdr_of(l);
    h->version = SEG_VERSION;
    h->size = (uint32_t)cfg->id.size;
    h->cap = l->cap;
    h->threshold = (uint32_t)cfg->threshold;
    h->fanout = (uint32_t)cfg->fanout;
    h->token = cfg->id.token;
    atomic_store(&h->creator, (int32_t)getpid());
    atomic_store_explicit(&h->magic, SEG_MAGIC, memory_order_release);
    return CCOL_OK;
}

/* Checks a ready header against this rank's view of the job. */
static ccol_status
check_hdr(const ccol__shm_link *l, const ccol__link_cfg *cfg,
          const seg_hdr *h, ccol__err *err)
{
    if (h->version != SEG_VERSION)
        return ccol__seterr(err, CCOL_ERR_VERSION,
                            "shm segment %s has layout version %u, this rank "
                            "speaks %u", l->path, h->version, SEG_VERSION);
    if (h->size != (uint32_t)cfg->id.size)
        return ccol__seterr(err, CCOL_ERR_INVALID_ARG,
                            "shm segment %s: rank %d says the world size is "
                            "%d, the job was created with size %u",
                            l->path, ccol__id_gr(&cfg->id, cfg->id.rank),
                            cfg->id.size, h->size);
    if (h->threshold != (uint32_t)cfg->threshold ||
        h->fanout != (uint32_t)cfg->fanout)
        return ccol__seterr(err, CCOL_ERR_INVALID_ARG,
                            "shm segment %s: rank %d uses tree threshold %d "
                            "and fanout %d, rank 0 uses %u and %u",
                            l->path, ccol__id_gr(&cfg->id, cfg->id.rank),
                            cfg->threshold,
                            cfg->fanout,
                            h->threshold, h->fanout);
    if (h->token != cfg->id.token)
        return ccol__seterr(err, CCOL_ERR_PEER,
                            "shm segment %s: rank %d presented a different "
                            "job token (CCOL_TOKEN differs)", l->path,
                            ccol__id_gr(&cfg->id, cfg->id.rank));
    if (h->cap != l->cap)
        return ccol__seterr(err, CCOL_ERR_VERSION,
                            "shm segment %s has rings of %u bytes, this rank "
                            "expects %u", l->path, h->cap, l->cap);
    return CCOL_OK;
}

/* Reserves the pages of this rank's two rings (up to its parent, down
 * from it) before anyone touches them. */
static ccol_status
reserve_rings(const ccol__shm_link *l, const ccol__link_cfg *cfg, int fd,
              ccol__err *err)
{
    size_t stride = sizeof(ccol__shm_ring) + l->cap;
    size_t off = rings_at(cfg) +
                 stride * (size_t)(2 * (cfg->id.rank - 1));

    errno = posix_fallocate(fd, (off_t)off, (off_t)(2 * stride));
    if (errno == 0)
        return CCOL_OK;
    return ccol__seterr(err, CCOL_ERR_IO,
                        "shm segment %s: cannot reserve rank %d's rings "
                        "(%zu bytes): %s (is /dev/shm full?)",
                        l->path, ccol__id_gr(&cfg->id, cfg->id.rank),
                        2 * stride,
                        strerror(errno));
}

/* Other ranks: one attempt to open a ready segment with a live rank 0.
 * 1 mapped, 0 not yet (retry), < 0 error in err. */
static int
open_seg(ccol__shm_link *l, const ccol__link_cfg *cfg, ccol__err *err)
{
    size_t bytes = seg_bytes(cfg, l->cap);
    int fd = shm_open(l->path, O_RDWR, 0);
    struct stat sb;
    seg_hdr *h;
    ccol_status st;
    bool ready;
    int creator;

    if (fd < 0 && errno == ENOENT)
        return 0;
    if (fd < 0) {
        refused_open(l->path, err);
        return -1;
    }
    if (fstat(fd, &sb) != 0 || (size_t)sb.st_size < CCOL__LINE) {
        close(fd);
        return 0; /* rank 0 is still sizing it */
    }
    if ((size_t)sb.st_size != bytes)
        bytes = CCOL__LINE; /* map the header to say what differs */
    st = map_fd(l, fd, bytes, err);
    if (st != CCOL_OK) {
        close(fd);
        return -1;
    }
    h = hdr_of(l);
    ready = atomic_load_explicit(&h->magic, memory_order_acquire) == SEG_MAGIC;
    creator = atomic_load(&h->creator);
    if (!ready || !pid_alive(creator)) {
        if (ready)
            l->gone_creator = creator; /* named if no new one comes */
        close(fd);
        ccol__shm_unmap(l); /* not ready yet, or stale: rank 0 replaces
                               it */
        return 0;
    }
    if ((st = check_hdr(l, cfg, h, err)) != CCOL_OK ||
        (bytes != seg_bytes(cfg, l->cap) &&
         (st = ccol__seterr(err, CCOL_ERR_PEER,
                            "shm segment %s has %zu bytes, a job of %d ranks "
                            "needs %zu", l->path, (size_t)sb.st_size,
                            cfg->id.size,
                            seg_bytes(cfg, l->cap))) != CCOL_OK) ||
        (st = reserve_rings(l, cfg, fd, err)) != CCOL_OK) {
        close(fd);
        ccol__shm_unmap(l);
        return -1;
    }
    l->fd = fd; /* kept for the size checks */
    return 1;
}

/* The segment this rank mapped was replaced or its rank 0 died. */
static bool
seg_replaced(const ccol__shm_link *l)
{
    int fd = shm_open(l->path, O_RDONLY, 0);
    struct stat sb;
    bool other;

    if (fd < 0)
        return !pid_alive(atomic_load(&hdr_of(l)->creator));
    other = fstat(fd, &sb) == 0 && sb.st_ino != l->ino;
    close(fd);
    return other || !pid_alive(atomic_load(&hdr_of(l)->creator));
}

/* Sleeps ns nanoseconds (under a second): the join's polling interval. */
static void
nap(int64_t ns)
{
    struct timespec ts = { 0, (long)ns };
    nanosleep(&ts, NULL);
}

/* Claims this rank's control line. A line claimed by a process that is
 * gone (this rank, killed while the job was still joining and started
 * again) is taken over: only a live process makes a duplicate rank. */
static ccol_status
claim(ccol__shm_link *l, const ccol__link_cfg *cfg, ccol__err *err)
{
    ccol__rank_ctl *k = ctl_of(l, cfg->id.rank);
    uint32_t want = CCOL__RANK_FREE;
    int32_t old = 0;

    if (!atomic_compare_exchange_strong(&k->state, &want,
                                        CCOL__RANK_JOINED)) {
        old = atomic_load(&k->pid);
        if (want != CCOL__RANK_JOINED || old <= 0 || pid_alive(old) ||
            !atomic_compare_exchange_strong(&k->pid, &old,
                                            (int32_t)getpid()))
            return ccol__seterr(err, CCOL_ERR_INVALID_ARG,
                                "shm segment %s: rank %d joined twice "
                                "(duplicate rank)",
                                l->path, ccol__id_gr(&cfg->id, cfg->id.rank));
        ccol__log(CCOL_LOG_INFO, "comm", "rank %d: shm segment %s: taking "
                  "over the line of this rank's earlier process %d, which "
                  "is gone", ccol__id_gr(&cfg->id, cfg->id.rank), l->path,
                  (int)old);
    }
    atomic_store(&k->pid, (int32_t)getpid());
    l->claimed = true;
    return CCOL_OK;
}

/* A rank that has not joined: its control line is still free, or the
 * process that claimed it is gone without leaving (killed while the job
 * was joining: its restart takes the line over, claim) or has not stored
 * its pid yet. A rank that left or failed counts as joined: the job's
 * first operation names it. */
static bool
unclaimed(const void *ud, int r)
{
    ccol__rank_ctl *k = ctl_of(ud, r);
    uint32_t state = atomic_load(&k->state);

    return state == CCOL__RANK_FREE ||
           (state == CCOL__RANK_JOINED && !pid_alive(atomic_load(&k->pid)));
}

/* Ranks whose lines are free, counted without a system call; when there
 * are none, the claimants are checked alive (once per poll, at the end of
 * the join only), so a job never forms around a rank that died while
 * joining, which would fail it as soon as it started. */
static int
count_missing(const ccol__shm_link *l, int size)
{
    int missing = 0;

    for (int r = 0; r < size; r++)
        missing += atomic_load(&ctl_of(l, r)->state) ==
                   CCOL__RANK_FREE;
    for (int r = 0; r < size && missing == 0; r++)
        missing += unclaimed(l, r);
    return missing;
}

/* Rank 0 left the segment on purpose (its own join gave up, or it
 * failed): its line says so, where a killed rank 0 leaves it joined. */
static bool
creator_left(const ccol__shm_link *l)
{
    uint32_t state = atomic_load(&ctl_of(l, 0)->state);

    return state == CCOL__RANK_DEPARTED || state == CCOL__RANK_FAILED;
}

/* The ranks still missing, named as the join's failure (and that rank 0
 * gave up first, when it did). */
static int
missed(const ccol__shm_link *l, const ccol__link_cfg *cfg, bool rank0_left,
       ccol__err *err)
{
    char where[192];

    snprintf(where, sizeof where, "shm segment %s%s", l->path,
             rank0_left ? " (its rank 0 gave up waiting first and left)"
                        : "");
    ccol__missed_join(err, &cfg->id, where, cfg->timeout_s, unclaimed, l);
    return -1;
}

/* Has the job formed? The first rank to see every rank joined and alive
 * says so in the header. A rank that looks later (rank 0 polling late)
 * may find one of them already dead: it died in the job, not while
 * joining, so this rank joins too and the job's first operation names it
 * (a PEER error at once, where waiting for a restart of a rank that
 * never comes back would end in a TIMEOUT at the deadline). The mark
 * counts only while rank 0 lives: a crashed job's segment says it formed
 * too, and is stale (await_all). Without it, every line is looked at as
 * before (a rank 0 that already ended the job counts as joined). */
static bool
formed(const ccol__shm_link *l, int size)
{
    seg_hdr *h = hdr_of(l);

    if (atomic_load(&h->formed) && pid_alive(atomic_load(&h->creator)))
        return true;
    if (count_missing(l, size) != 0)
        return false;
    atomic_store(&h->formed, 1u);
    return true;
}

/* Waits until every rank joined. 1 when the segment must be reopened
 * (it was stale), 0 when all joined, < 0 on failure. A segment whose
 * rank 0 gave up and left (it started a little earlier, so its deadline
 * comes first) is not stale: the ranks missing for it are missing for
 * this rank too, and are named now. */
static int
await_all(ccol__shm_link *l, const ccol__link_cfg *cfg, int64_t deadline,
          ccol__err *err)
{
    int64_t pause = 100000, next_check = ccol__now_ns() + 5000000;

    for (;;) {
        if (formed(l, cfg->id.size))
            return 0;
        if (cfg->id.rank != 0 && ccol__now_ns() >= next_check) {
            if (seg_replaced(l))
                return creator_left(l) ? missed(l, cfg, true, err) : 1;
            next_check = ccol__now_ns() + 5000000;
        }
        if (ccol__past(deadline))
            return missed(l, cfg, false, err);
        nap(pause);
        if (pause < 2000000)
            pause *= 2;
    }
}

/* The join's deadline passed with no live segment to join: rank 0 has
 * not made one, or gave up and removed it (this rank came late: it cannot
 * tell which), or the one it made is left by a rank 0 that is gone. */
static ccol_status
no_segment(const ccol__shm_link *l, const ccol__link_cfg *cfg,
           ccol__err *err)
{
    if (l->gone_creator > 0)
        return ccol__seterr(err, CCOL_ERR_TIMEOUT,
                            "shm segment %s: rank %d (pid %d), which created "
                            "it, is gone and no new one was made within "
                            "%.3g s (missing: %d)",
                            l->path, ccol__id_gr(&cfg->id, 0), l->gone_creator,
                            cfg->timeout_s, ccol__id_gr(&cfg->id, 0));
    return ccol__seterr(err, CCOL_ERR_TIMEOUT,
                        "shm segment %s: none to join within %.3g s: rank %d "
                        "has not created it, or it gave up on the job and "
                        "removed it before this rank came (missing: %d)",
                        l->path, cfg->timeout_s, ccol__id_gr(&cfg->id, 0),
                        ccol__id_gr(&cfg->id, 0));
}

/* Maps the segment (creating it on rank 0) and waits for every rank. */
static ccol_status
join_seg(ccol__shm_link *l, const ccol__link_cfg *cfg, int64_t deadline,
     ccol__err *err)
{
    int64_t pause = 100000;

    if (cfg->id.rank == 0) {
        ccol_status st = create_seg(l, cfg, err);
        if (st == CCOL_OK)
            st = claim(l, cfg, err);
        if (st == CCOL_OK && await_all(l, cfg, deadline, err) != 0)
            st = err->code;
        return st;
    }
    for (;;) {
        int got = open_seg(l, cfg, err), w;
        if (got < 0)
            return err->code;
        if (got == 0) {
            if (ccol__past(deadline))
                return no_segment(l, cfg, err);
            nap(pause);
            if (pause < 2000000)
                pause *= 2;
            continue;
        }
        if (claim(l, cfg, err) != CCOL_OK) {
            ccol__shm_unmap(l);
            return err->code;
        }
        w = await_all(l, cfg, deadline, err);
        if (w <= 0)
            return w == 0 ? CCOL_OK : err->code;
        ccol__log(CCOL_LOG_INFO, "comm", "rank %d/%d: shm segment %s was "
                  "stale; joining the new one", cfg->id.rank, cfg->id.size,
                  l->path);
        l->claimed = false;
        ccol__shm_unmap(l);
    }
}

/* Rank 0 removes the name if it is still the segment it created. */
void
ccol__shm_drop_name(ccol__shm_link *l)
{
    int fd;
    struct stat sb;

    if (!l->named)
        return;
    l->named = false;
    ccol__shm_reap_remove(l->reap);
    l->reap = 0;
    fd = shm_open(l->path, O_RDONLY, 0);
    if (fd < 0)
        return;
    if (fstat(fd, &sb) == 0 && sb.st_ino == l->ino)
        shm_unlink(l->path);
    close(fd);
}


/* The join's deadline is the link's timeout from now. */
ccol_status
ccol__shm_join(ccol__shm_link *l, const ccol__link_cfg *cfg, ccol__err *err)
{
    int64_t deadline = ccol__now_ns() + (int64_t)(cfg->timeout_s * 1e9);

    return join_seg(l, cfg, deadline, err);
}
