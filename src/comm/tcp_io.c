/*
 * tcp_io.c - sockets with deadlines for the tcp transport. Every wait is a
 * poll() bounded by a monotonic deadline, never a busy loop, and sockets
 * are non-blocking so a stuck peer cannot hold a rank past its deadline.
 * A frame is read header first: the header is decoded and its payload
 * length bounded before anything is allocated. Failures are described as
 * predicates about the sender ("closed its connection (did it exit?)") so
 * callers can name the rank in front.
 */
#include "tcp_link.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef SOCK_CLOEXEC
#define SOCK_CLOEXEC 0
#endif

#define BACKOFF_MIN_NS  (5 * 1000000LL)
#define BACKOFF_MAX_NS  (200 * 1000000LL)
#define CONNECT_STEP_NS (2000 * 1000000LL)

/* A monotonic deadline `seconds` from now, clamped so a huge or bad
 * timeout cannot overflow the clock arithmetic. */
int64_t
ccol__tcp_deadline(double seconds)
{
    if (!(seconds > 0))
        seconds = 0;
    if (seconds > 1e9)
        seconds = 1e9;
    return ccol__now_ns() + (int64_t)(seconds * 1e9);
}

/* Milliseconds for poll(2), rounded up (so a wait never ends just before
 * its deadline) and cut at the interrupt hook's next check. */
int
ccol__tcp_ms_left(int64_t deadline)
{
    int64_t left = ccol__intr_wake(deadline) - ccol__now_ns();

    if (left <= 0)
        return 0;
    left = (left + 999999) / 1000000;
    return left > INT_MAX ? INT_MAX : (int)left;
}

/* Every socket is non-blocking (all waits go through poll with a
 * deadline) and closed on exec (a rank's children must not inherit it). */
bool
ccol__tcp_prepare(int fd)
{
    int one = 1;
    int fl = fcntl(fd, F_GETFL);

    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
        return false;
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0)
        return false;
    /* Small control messages: never wait for Nagle's algorithm. */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return true;
}

/* Waits until fd is ready for `events` or the deadline passes. Errors and
 * hang-ups count as ready: the next send/recv reports them. */
static ccol__tcp_io
wait_fd(int fd, short events, int64_t deadline, int *err)
{
    struct pollfd pf = { .fd = fd, .events = events };

    for (;;) {
        int ms = ccol__tcp_ms_left(deadline);
        int r = poll(&pf, 1, ms);

        if (r > 0)
            return CCOL__IO_OK;
        if (r == 0 && ccol__past(deadline))
            return CCOL__IO_TIMEOUT;
        if (r < 0 && errno != EINTR) {
            *err = errno;
            return CCOL__IO_ERR;
        }
    }
}

/* Moves bytes until *done == len, an error or the deadline: sends from p
 * when `out`, else receives into it (the peer closing is CCOL__IO_EOF). */
static ccol__tcp_io
transfer(int fd, uint8_t *p, size_t len, bool out, int64_t deadline,
         size_t *done, int *err)
{
    while (*done < len) {
        ssize_t n = out ? send(fd, p + *done, len - *done, MSG_NOSIGNAL)
                        : recv(fd, p + *done, len - *done, 0);
        ccol__tcp_io io;

        if (n > 0) {
            *done += (size_t)n;
            continue;
        }
        if (n == 0 && !out)
            return CCOL__IO_EOF;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            *err = errno;
            return CCOL__IO_ERR;
        }
        io = wait_fd(fd, out ? POLLOUT : POLLIN, deadline, err);
        if (io != CCOL__IO_OK)
            return io;
    }
    return CCOL__IO_OK;
}

/* Writes a whole buffer, waiting for room until the deadline. */
ccol__tcp_io
ccol__tcp_write(int fd, const void *p, size_t len, int64_t deadline, int *err)
{
    size_t done = 0;

    /* transfer() only reads through the pointer when sending. */
    return transfer(fd, (uint8_t *)(uintptr_t)p, len, true, deadline, &done,
                    err);
}

/* Reads until *got == len, EOF, an error or the deadline. */
static ccol__tcp_io
read_full(int fd, uint8_t *p, size_t len, int64_t deadline, size_t *got,
          int *err)
{
    return transfer(fd, p, len, false, deadline, got, err);
}

/* Describes a failed read of `what` (got of len bytes). `started` says a
 * part of this frame came before. */
static ccol_status
io_why(ccol__tcp_io io, int err, size_t got, size_t len, const char *what,
       bool started, char *why, size_t whylen)
{
    bool partial = started || got > 0;

    if (io == CCOL__IO_TIMEOUT && !partial) {
        snprintf(why, whylen, "sent nothing before the deadline");
        return CCOL_ERR_TIMEOUT;
    }
    if (io == CCOL__IO_EOF && !partial)
        snprintf(why, whylen, "closed its connection (did it exit?)");
    else if (io == CCOL__IO_EOF)
        snprintf(why, whylen,
                 "closed its connection in the middle of a frame "
                 "(truncated: %zu of %zu %s bytes)",
                 got, len, what);
    else if (io == CCOL__IO_TIMEOUT)
        snprintf(why, whylen,
                 "sent a truncated frame (%zu of %zu %s bytes, then "
                 "nothing until the deadline)",
                 got, len, what);
    else if (err == ECONNRESET || err == EPIPE)
        snprintf(why, whylen, "reset its connection (did it exit?)");
    else
        snprintf(why, whylen, "is unreachable: the connection failed (%s)",
                 strerror(err));
    return CCOL_ERR_PEER;
}

/* Reads the body announced by m->h (payload and label, both already
 * bounded) in one read. */
static ccol_status
read_payload(int fd, ccol__msg *m, int64_t deadline, char *why, size_t whylen)
{
    size_t got = 0, n = ccol__hdr_body(&m->h);
    int err = 0;
    uint8_t *body;
    ccol__tcp_io io;

    if (n == 0)
        return CCOL_OK;
    body = malloc(n);
    if (body == NULL) {
        snprintf(why, whylen, "sent a payload of %u bytes: out of memory",
                 (unsigned)m->h.len);
        return CCOL_ERR_NO_MEMORY;
    }
    io = read_full(fd, body, n, deadline, &got, &err);
    if (io == CCOL__IO_OK) {
        ccol__msg_take_body(m, body);
        return CCOL_OK;
    }
    free(body);
    return io_why(io, err, got, n, "payload", true, why, whylen);
}

/* Reads one frame: the header (with `wait`, until the deadline; without,
 * only when its first bytes are already there, a frame once begun being
 * read to its end), then its payload within the deadline. A bad frame or
 * a close says why in `why`. */
ccol_status
ccol__tcp_read_frame(int fd, size_t max_payload, int64_t deadline, bool wait,
                     ccol__msg *m, uint8_t *raw, char *why, size_t whylen)
{
    uint8_t hdr[CCOL__HDR_SIZE];
    char dec[200];
    size_t got = 0;
    int err = 0;
    ccol__tcp_io io;
    ccol_status st;

    memset(m, 0, sizeof *m);
    io = read_full(fd, hdr, sizeof hdr, wait ? deadline : 0, &got, &err);
    if (io == CCOL__IO_TIMEOUT && got > 0 && !wait)
        io = read_full(fd, hdr, sizeof hdr, deadline, &got, &err);
    if (io != CCOL__IO_OK)
        return io_why(io, err, got, sizeof hdr, "header", false, why, whylen);
    if (raw != NULL)
        memcpy(raw, hdr, sizeof hdr);
    st = ccol__hdr_decode(hdr, max_payload, &m->h, dec, sizeof dec);
    if (st == CCOL_ERR_VERSION) {
        snprintf(why, whylen, "speaks %s", dec);
        return st;
    }
    if (st != CCOL_OK) {
        snprintf(why, whylen, "sent a bad frame: %s", dec);
        return CCOL_ERR_PEER;
    }
    return read_payload(fd, m, deadline, why, whylen);
}

/* Resolves host:port for a stream socket. */
static int
resolve(const char *host, int port, bool passive, struct addrinfo **out)
{
    struct addrinfo hints;
    char serv[16];

    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
    snprintf(serv, sizeof serv, "%d", port);
    return getaddrinfo(host, serv, &hints, out);
}

/* True when fd is connected to itself: a connect to a free local port in
 * the ephemeral range can pick that port as its own source port. */
static bool
self_connected(int fd)
{
    char a[64], b[64];
    int pa, pb;

    if (!ccol__tcp_name(fd, false, a, sizeof a, &pa) ||
        !ccol__tcp_name(fd, true, b, sizeof b, &pb))
        return false;
    return pa == pb && strcmp(a, b) == 0;
}

/* One connection attempt to ai, bounded by the deadline. Returns the
 * socket or -1 with *err set. */
static int
try_connect(const struct addrinfo *ai, int64_t deadline, int *err)
{
    int fd =
        socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    int64_t step = ccol__now_ns() + CONNECT_STEP_NS;
    socklen_t len = sizeof *err;

    if (fd < 0 || !ccol__tcp_prepare(fd)) {
        *err = errno;
        goto fail;
    }
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (errno != EINPROGRESS) {
            *err = errno;
            goto fail;
        }
        if (wait_fd(fd, POLLOUT, step < deadline ? step : deadline, err) !=
            CCOL__IO_OK) {
            *err = ETIMEDOUT;
            goto fail;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, err, &len) != 0 || *err) {
            *err = *err ? *err : errno;
            goto fail;
        }
    }
    if (!self_connected(fd))
        return fd;
    *err = ECONNREFUSED;
fail:
    if (fd >= 0)
        close(fd);
    return -1;
}

/* Sleeps ns nanoseconds (or until the deadline, whichever is first):
 * between connection attempts, here and in tcp_sub.c. */
void
ccol__tcp_nap(int64_t ns, int64_t deadline)
{
    int64_t left = deadline - ccol__now_ns();
    struct timespec ts;

    if (left < ns)
        ns = left;
    if (ns <= 0)
        return;
    ts.tv_sec = (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Connects to host:port, retrying with backoff until the deadline: rank
 * 0 may not be listening yet when the others start. */
ccol_status
ccol__tcp_connect(const char *host, int port, int64_t deadline, int *fd,
                  char *why, size_t whylen)
{
    struct addrinfo *ai = NULL;
    int64_t backoff = BACKOFF_MIN_NS;
    int err = ECONNREFUSED, r = resolve(host, port, false, &ai);

    if (r != 0) {
        snprintf(why, whylen, "cannot resolve \"%s\": %s", host,
                 gai_strerror(r));
        return CCOL_ERR_IO;
    }
    for (;;) {
        for (struct addrinfo *p = ai; p != NULL; p = p->ai_next) {
            *fd = try_connect(p, deadline, &err);
            if (*fd >= 0) {
                freeaddrinfo(ai);
                return CCOL_OK;
            }
        }
        if (ccol__past(deadline))
            break;
        ccol__tcp_nap(backoff, ccol__intr_wake(deadline));
        backoff = backoff * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : backoff * 2;
    }
    freeaddrinfo(ai);
    snprintf(why, whylen, "last attempt: %s", strerror(err));
    return CCOL_ERR_TIMEOUT;
}

/* Binds and listens on one resolved address. Returns the socket or -1. */
static int
listen_on(const struct addrinfo *ai, int *err)
{
    int one = 1;
    int fd =
        socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);

    if (fd < 0) {
        *err = errno;
        return -1;
    }
    if (!ccol__tcp_prepare(fd) ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 ||
        listen(fd, SOMAXCONN) != 0) {
        *err = errno;
        close(fd);
        return -1;
    }
    return fd;
}

/* Listens on the first address of host that binds; port 0 picks a free
 * port, reported in *bound_port. */
ccol_status
ccol__tcp_listen(const char *host, int port, int *fd, int *bound_port,
                 char *why, size_t whylen)
{
    struct addrinfo *ai = NULL;
    char ip[64];
    int err = EADDRNOTAVAIL, r = resolve(host, port, true, &ai);

    if (r != 0) {
        snprintf(why, whylen, "cannot resolve \"%s\": %s", host,
                 gai_strerror(r));
        return CCOL_ERR_IO;
    }
    *fd = -1;
    for (struct addrinfo *p = ai; p != NULL && *fd < 0; p = p->ai_next)
        *fd = listen_on(p, &err);
    freeaddrinfo(ai);
    if (*fd < 0) {
        snprintf(why, whylen, "cannot listen on %s:%d: %s", host, port,
                 strerror(err));
        return CCOL_ERR_IO;
    }
    if (!ccol__tcp_name(*fd, false, ip, sizeof ip, bound_port))
        *bound_port = port;
    return CCOL_OK;
}

/* The numeric address of a socket's local or peer end, for messages and
 * for the addresses rank 0 hands out. */
bool
ccol__tcp_name(int fd, bool peer, char *ip, size_t iplen, int *port)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char serv[16];
    int r;

    r = peer ? getpeername(fd, (struct sockaddr *)&ss, &len)
             : getsockname(fd, (struct sockaddr *)&ss, &len);
    if (r != 0 ||
        getnameinfo((struct sockaddr *)&ss, len, ip, (socklen_t)iplen, serv,
                    sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
        snprintf(ip, iplen, "?");
        *port = 0;
        return false;
    }
    *port = atoi(serv);
    return true;
}

/* Sends one rendezvous frame: before the first operation, so sequence
 * number 0 and no label. Only WELCOME carries the token digest: before
 * authentication a peer's frames are judged by their MAC alone. */
ccol__tcp_io
ccol__tcp_send_frame(const ccol__ident *id, int fd, uint16_t kind,
                     uint64_t arg, const void *payload, size_t len,
                     ccol__tcp_key *key, int64_t deadline, int *err)
{
    ccol__hdr h;
    size_t flen;
    uint8_t *f;
    ccol__tcp_io io;

    ccol__hdr_init(&h, id, kind, CCOL__OP_RENDEZVOUS, 0, arg,
                   ccol__wall_ns(), "", 0);
    if (kind != CCOL__K_WELCOME)
        h.token = 0;
    f = ccol__frame_encode(&h, payload, len, &flen);
    if (f == NULL) {
        *err = ENOMEM;
        return CCOL__IO_ERR;
    }
    if (key != NULL && key->on)
        ccol__tcp_seal(key, f, flen);
    io = ccol__tcp_write(fd, f, flen, deadline, err);
    free(f);
    return io;
}
