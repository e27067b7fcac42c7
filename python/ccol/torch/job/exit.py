"""Leaving the process cleanly: no ccol.torch thread in a store call.

ccol.torch's own threads (the heartbeat, the join begun in the background
after init_process_group) call torch's c10d store. A store call releases
the GIL while it waits on the network. If the process exits meanwhile
(the script ended, or raised), CPython 3.11 ends such a thread on the spot
when the call returns and asks for the GIL back (pthread_exit). That
unwind runs through the store binding's C++ frames and ends in
std::terminate, so the process dies of SIGABRT ("terminate called without
an active exception") instead of exiting with its own status: worse than
the same job without ccol.

So every store call ccol.torch makes goes through Guarded. This module is
imported with ccol.torch, in the main thread, so its atexit handler is in
place before any of those threads starts (a handler placed by a thread
while the interpreter already runs its handlers would never run). At exit
(atexit, before the interpreter finalizes) calls from threads other than
the main thread are refused (StoreClosed, which those threads take as
their end), and the calls under way are waited for. Each such call is
bounded by the store's own timeout and normally takes milliseconds; the
wait gives up after EXIT_WAIT_S with a WARNING.
"""
import atexit
import os
import sys
import threading
import time

from .._log import log

EXIT_WAIT_S = 30.0  # the longest exit waits for a store call under way
_WARN_S = 2.0       # a wait longer than this is said


class StoreClosed(RuntimeError):
    """A store call refused because the process is exiting."""


class _State:
    def __init__(self):
        self.cv = threading.Condition(threading.Lock())
        self.busy = 0        # store calls under way, all threads
        self.closing = False


_state = _State()


def _after_fork():
    # a child starts with no call under way (the lock may have been held
    # by a thread that does not exist in it)
    global _state
    _state = _State()


os.register_at_fork(after_in_child=_after_fork)


def call(fn, *args, **kwargs):
    """fn(*args, **kwargs), a call into torch's store (made, counted, or
    refused at exit: StoreClosed)."""
    st = _state
    with st.cv:
        if (st.closing or sys.is_finalizing()) and \
                threading.current_thread() is not threading.main_thread():
            raise StoreClosed("the process is exiting: ccol.torch makes "
                              "no more store calls from its threads")
        st.busy += 1
    try:
        return fn(*args, **kwargs)
    finally:
        with st.cv:
            st.busy -= 1
            if st.busy == 0:
                st.cv.notify_all()


class Guarded:
    """A c10d store whose calls (set, get, check, ...) are counted and
    refused at exit from ccol.torch's threads; every other attribute
    (underlying_store, host, port, timeout) is the store's own."""

    __slots__ = ("store",)

    def __init__(self, store):
        self.store = store

    def __getattr__(self, name):
        got = getattr(self.store, name)
        if not callable(got):
            return got
        return lambda *args, **kwargs: call(got, *args, **kwargs)


def guarded(store):
    """store wrapped in Guarded (once: a Guarded store is returned as is)."""
    return store if isinstance(store, Guarded) else Guarded(store)


def close(limit=EXIT_WAIT_S):
    """Refuses further store calls from other threads and waits (up to
    limit seconds) until none is under way. Returns True when none is."""
    st = _state
    start = time.monotonic()
    warned = False
    with st.cv:
        st.closing = True
        while st.busy:
            waited = time.monotonic() - start
            if waited >= limit:
                log.warning("ccol.torch: %d store calls of its threads still "
                            "run after %g s at exit; the process may end "
                            "with SIGABRT", st.busy, limit)
                return False
            if waited >= _WARN_S and not warned:
                warned = True
                log.warning("ccol.torch: at exit, waiting for %d store "
                            "calls of its threads to end (at most %g s)",
                            st.busy, limit)
            st.cv.wait(min(0.1, limit - waited))
    return True


atexit.register(close)
