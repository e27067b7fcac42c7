/*
 * raw_peer.h - the socket chores of the tcp tests' hand-made peers (a
 * fake rank 0, a stranger, a proxy): accept one connection, and wait for
 * the other side to hang up. Shared by test_tcp.c and test_tcp_auth.c.
 */
#ifndef CCOL_TEST_RAW_PEER_H
#define CCOL_TEST_RAW_PEER_H

#include "harness.h"

#include "comm/tcp_link.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

/* Waits (5 s at most) until the peer closes fd, discarding what it sends. */
static inline void
raw_drain(int fd)
{
    uint8_t b[256];
    double end = ccol_test_now() + 5;

    while (ccol_test_now() < end) {
        ssize_t n = recv(fd, b, sizeof b, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            break;
        if (n < 0)
            usleep(2000);
    }
}

/* Accepts one connection on a listener (timeout_ms), made non-blocking
 * like the library's own sockets; -1 if none came. */
static inline int
raw_accept(int lfd, int timeout_ms)
{
    struct pollfd pf = { .fd = lfd, .events = POLLIN };
    int fd;

    if (poll(&pf, 1, timeout_ms) != 1)
        return -1;
    fd = accept(lfd, NULL, NULL);
    if (fd >= 0)
        ccol__tcp_prepare(fd);
    return fd;
}

#endif
