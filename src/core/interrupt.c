/*
 * interrupt.c - the caller's interrupt hook, as every wait of the running
 * operation sees it.
 *
 * An embedding such as the Python binding cannot take a signal while a
 * collective sleeps in poll() or a condition wait, so the communicator
 * installs its hook on the calling thread for the length of one operation
 * and every wait of the transports asks two questions here: when must I
 * wake up at the latest (the deadline, or sooner to call the hook), and has
 * my deadline passed (the real one, or because the hook asked to stop).
 * The state is per thread, so operations on different threads (inproc ranks)
 * never see each other's hooks, and an operation without a hook pays one
 * branch per wait.
 */
#include "core.h"

/* How often a waiting operation calls the hook. */
#define CCOL__INTR_SLICE_NS (50 * 1000000LL)

static _Thread_local ccol__intr cur;

ccol__intr
ccol__intr_begin(ccol_interrupt_fn fn, void *ud)
{
    ccol__intr prev = cur;
    cur.fn = fn;
    cur.ud = ud;
    cur.hit = false;
    cur.next = fn ? ccol__now_ns() + CCOL__INTR_SLICE_NS : 0;
    return prev;
}

bool
ccol__intr_end(ccol__intr prev)
{
    bool hit = cur.hit;
    cur = prev;
    return hit;
}

bool
ccol__intr_hit(void)
{
    int64_t now;

    if (cur.hit || cur.fn == NULL)
        return cur.hit;
    now = ccol__now_ns();
    if (now < cur.next)
        return false;
    cur.next = now + CCOL__INTR_SLICE_NS;
    if (cur.fn(cur.ud) != 0)
        cur.hit = true;
    return cur.hit;
}

int64_t
ccol__intr_wake(int64_t deadline)
{
    if (ccol__intr_hit())
        return 0;
    if (cur.fn != NULL && cur.next < deadline)
        return cur.next;
    return deadline;
}

bool
ccol__past(int64_t deadline)
{
    return ccol__intr_hit() || ccol__now_ns() >= deadline;
}
