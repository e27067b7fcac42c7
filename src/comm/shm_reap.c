/*
 * shm_reap.c - a segment name this process created is not left behind
 * when the process is terminated while its job forms.
 *
 * Rank 0 creates the segment's name and removes it once every rank has
 * mapped it (ccol__shm_drop_name). A launcher that gives up on the job in
 * between (torchrun sends SIGTERM to every worker when one fails) would
 * leave the name in /dev/shm, and a random name (ccol.torch's) is never
 * created again to be found stale. So while a name is held, it is listed
 * here, and the first one listed installs, once per process, a SIGTERM
 * handler that removes every listed name still behind the inode it was
 * created with, then hands the signal to the action installed before (the
 * application's handler, or the default: the process dies of SIGTERM as
 * it would have without ccol). Where SIGTERM was ignored, nothing is
 * installed. An application that installs its own SIGTERM handler later
 * keeps it; ccol_shm_sweep then removes what was left at the next job.
 *
 * The table is read by the handler without locks: a slot is published
 * by storing its state READY after its path and inode, and freed by
 * storing FREE first.
 */
#include "shm_link.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REAP_MAX 64 /* names held at once; more are not reaped */

enum { FREE, BUSY, READY };

typedef struct reap_slot {
    _Atomic int state;
    char file[128]; /* "/dev/shm" + the segment's name */
    ino_t ino;      /* the inode the name stood for when created */
    pid_t pid;      /* the process that created it: a child forked later
                       inherits the table and the handler, never the name */
} reap_slot;

static reap_slot slots[REAP_MAX];
static pthread_once_t install_once = PTHREAD_ONCE_INIT;
static struct sigaction before; /* the action ccol's replaced */
static bool installed;

/* Hands SIGTERM to the action installed before ccol's. */
static void
chain(int sig, siginfo_t *si, void *uc)
{
    struct sigaction dfl;

    if ((before.sa_flags & SA_SIGINFO) && before.sa_sigaction != NULL) {
        before.sa_sigaction(sig, si, uc);
        return;
    }
    if (before.sa_handler != SIG_DFL && before.sa_handler != SIG_IGN) {
        before.sa_handler(sig);
        return;
    }
    /* the default: blocked while this handler runs, the signal raised
     * again is delivered as it returns, and the process dies of it */
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, NULL);
    raise(sig);
}

/* Only async-signal-safe calls: getpid, stat, unlink, atomics. */
static void
on_sigterm(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;

    for (int i = 0; i < REAP_MAX; i++) {
        struct stat sb;

        if (atomic_load(&slots[i].state) != READY ||
            slots[i].pid != getpid())
            continue;
        if (stat(slots[i].file, &sb) == 0 && sb.st_ino == slots[i].ino)
            unlink(slots[i].file);
    }
    errno = saved;
    chain(sig, si, uc);
}

static void
install(void)
{
    struct sigaction sa;

    if (sigaction(SIGTERM, NULL, &before) != 0 ||
        (!(before.sa_flags & SA_SIGINFO) && before.sa_handler == SIG_IGN))
        return; /* ignored: the process does not die of it */
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigterm;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    installed = sigaction(SIGTERM, &sa, &before) == 0;
}

int
ccol__shm_reap_add(const char *path, ino_t ino)
{
    pthread_once(&install_once, install);
    if (!installed)
        return 0;
    for (int i = 0; i < REAP_MAX; i++) {
        int want = FREE;

        if (!atomic_compare_exchange_strong(&slots[i].state, &want, BUSY))
            continue;
        snprintf(slots[i].file, sizeof slots[i].file, "/dev/shm%s", path);
        slots[i].ino = ino;
        slots[i].pid = getpid();
        atomic_store(&slots[i].state, READY);
        return i + 1;
    }
    return 0;
}

void
ccol__shm_reap_remove(int slot)
{
    if (slot >= 1 && slot <= REAP_MAX)
        atomic_store(&slots[slot - 1].state, FREE);
}
