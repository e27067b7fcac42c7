/*
 * shm_guard.c - a segment truncated from outside is a named error, never a
 * SIGBUS.
 *
 * A process that shrinks a segment's file makes the next access to the
 * lost pages fault with SIGBUS. The size checks (ccol__shm_check_size)
 * find a truncation between accesses; this closes the window between a
 * check and the next access. The first mapped segment installs, once per
 * process, a SIGBUS handler that looks the faulting address up among the
 * segments this process mapped: inside one, it maps private zero pages
 * over that whole mapping (so the faulting access is retried against
 * zeros, and later writes go nowhere) and marks the segment cut, which
 * the next size check reports by name ("the shared memory segment ... was
 * truncated"). Every other fault goes to the action that was installed
 * before (the application's handler, or the default: the process dies of
 * SIGBUS as it would have without ccol). An application that installs its
 * own SIGBUS handler after ccol keeps it, and then only the size checks
 * apply.
 *
 * The table of guarded ranges is read by the handler without locks: a
 * range is published by storing its end, then its start; removed by
 * clearing its start first.
 */
#define _GNU_SOURCE
#include "shm_link.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#define GUARD_MAX 256 /* segments mapped at once; more go unguarded */

typedef struct guard {
    _Atomic uintptr_t lo;  /* start of the mapping, 0 when free */
    _Atomic uintptr_t hi;  /* its end */
    _Atomic int cut;       /* replaced by zeros after a fault */
} guard;

static guard guards[GUARD_MAX];
static pthread_mutex_t guards_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;
static struct sigaction before; /* the action ccol's replaced */

/* Hands a fault that is not ccol's to the action installed before. */
static void
chain(int sig, siginfo_t *si, void *uc)
{
    if ((before.sa_flags & SA_SIGINFO) && before.sa_sigaction != NULL) {
        before.sa_sigaction(sig, si, uc);
    } else if (before.sa_handler != SIG_DFL && before.sa_handler != SIG_IGN) {
        before.sa_handler(sig);
    } else {
        /* the default: returning re-runs the access, which faults again
         * and now kills the process with SIGBUS */
        struct sigaction dfl;

        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigaction(SIGBUS, &dfl, NULL);
    }
}

/* Only async-signal-safe calls: mmap, sigaction, atomics. */
static void
on_sigbus(int sig, siginfo_t *si, void *uc)
{
    uintptr_t a = (uintptr_t)si->si_addr;
    int saved = errno;

    for (int i = 0; i < GUARD_MAX; i++) {
        uintptr_t lo = atomic_load(&guards[i].lo);
        uintptr_t hi = atomic_load(&guards[i].hi);

        if (lo == 0 || a < lo || a >= hi)
            continue;
        if (mmap((void *)lo, hi - lo, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
            MAP_FAILED)
            break;
        atomic_store(&guards[i].cut, 1);
        errno = saved;
        return;
    }
    errno = saved;
    chain(sig, si, uc);
}

static void
install(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &before);
}

int
ccol__shm_guard_add(void *base, size_t len)
{
    int slot = -1;

    pthread_once(&install_once, install);
    pthread_mutex_lock(&guards_lock);
    for (int i = 0; i < GUARD_MAX && slot < 0; i++) {
        if (atomic_load(&guards[i].lo) != 0)
            continue;
        slot = i;
        atomic_store(&guards[i].cut, 0);
        atomic_store(&guards[i].hi, (uintptr_t)base + len);
        atomic_store(&guards[i].lo, (uintptr_t)base);
    }
    pthread_mutex_unlock(&guards_lock);
    return slot;
}

void
ccol__shm_guard_remove(int slot)
{
    if (slot < 0 || slot >= GUARD_MAX)
        return;
    pthread_mutex_lock(&guards_lock);
    atomic_store(&guards[slot].lo, 0);
    atomic_store(&guards[slot].hi, 0);
    pthread_mutex_unlock(&guards_lock);
}

bool
ccol__shm_guard_cut(int slot)
{
    return slot >= 0 && slot < GUARD_MAX && atomic_load(&guards[slot].cut);
}
