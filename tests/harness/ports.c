/*
 * ports.c - free TCP ports for tests, from a block this process holds
 * alone.
 *
 * A port the kernel picks (bind to port 0) lies in its ephemeral range, and
 * between the pick and the test's rank 0 listening on it another test
 * process's outgoing connection, or its own pick, can take it (ctest runs
 * test programs side by side, pytest has workers). Test ports therefore
 * come from blocks below that range: a process claims a block by binding
 * a Unix socket of the abstract namespace named after the user and the
 * block (machine-wide, whatever TMPDIR says; released when the process
 * exits, so a killed test frees its block, and no file is left behind)
 * and hands its ports out in turn from a point of its own, so a port just
 * used rests a while. The Python suite's conftest.py claims the same
 * names. When every block is held the kernel picks.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define PORT_LOW   20000
#define PORT_BLOCK 500

static pid_t owner;   /* the process that claimed `base` */
static int base = -1; /* first port of its block, -1: none */
static unsigned next; /* the next port's offset, modulo PORT_BLOCK */

/* The first port of the kernel's ephemeral range. */
static int
ephemeral_low(void)
{
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    int low = 32768;

    if (f != NULL) {
        if (fscanf(f, "%d", &low) != 1)
            low = 32768;
        fclose(f);
    }
    return low < 32768 ? low : 32768;
}

/* Claims the first free block: its first port, or -1. The socket that
 * holds it stays open until the process exits. */
static int
claim_block(void)
{
    int nblocks = (ephemeral_low() - PORT_LOW) / PORT_BLOCK;

    for (int b = 0; b < nblocks; b++) {
        struct sockaddr_un a = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), n;

        /* sun_path[0] stays NUL: the abstract namespace */
        n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1,
                     "ccol-test-ports-%d-%d", (int)getuid(), b);
        if (fd >= 0 &&
            bind(fd, (struct sockaddr *)&a,
                 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
                             (size_t)n)) == 0)
            return PORT_LOW + b * PORT_BLOCK;
        if (fd >= 0)
            close(fd);
    }
    return -1;
}

/* Binds 127.0.0.1:port (0: the kernel's choice) as a listener would; the
 * port bound, or -1. */
static int
try_bind(int port)
{
    struct sockaddr_in a = { 0 };
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, got;

    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    got = bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
                  getsockname(fd, (struct sockaddr *)&a, &len) == 0
              ? ntohs(a.sin_port)
              : -1;
    close(fd);
    return got;
}

int
ccol_test_free_port(void)
{
    int port;

    if (owner != getpid()) {
        owner = getpid();
        base = claim_block();
        next = (unsigned)owner;
    }
    for (int i = 0; base >= 0 && i < PORT_BLOCK; i++) {
        port = base + (int)(next++ % PORT_BLOCK);
        if (try_bind(port) == port)
            return port;
    }
    port = try_bind(0);
    if (port < 0) {
        perror("free port");
        abort();
    }
    return port;
}
