/*
 * util.c - small helpers the subcommands share (util.h).
 */
#include "util.h"

#include "ccol.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

double
tool_now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Skips a run of decimal digits; returns how many there were. */
static size_t
skip_digits(const char **s)
{
    const char *p = *s;

    while (**s >= '0' && **s <= '9')
        (*s)++;
    return (size_t)(*s - p);
}

/* True when s is digits with an optional fraction and exponent. */
static int
is_plain_decimal(const char *s)
{
    size_t n = skip_digits(&s);

    if (*s == '.') {
        s++;
        n += skip_digits(&s);
    }
    if (n == 0)
        return 0;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        if (skip_digits(&s) == 0)
            return 0;
    }
    return *s == '\0';
}

int
tool_parse_seconds(const char *s, double max, double *out)
{
    double v;

    if (s == NULL || !is_plain_decimal(s))
        return -1;
    errno = 0;
    v = strtod(s, NULL);
    if (errno != 0 || !(v >= TOOL_MIN_SECONDS && v <= max))
        return -1;
    *out = v;
    return 0;
}

void
tool_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t k = write(fd, p, len);

        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return;
        p += k;
        len -= (size_t)k;
    }
}

int
tool_free_port(const char *addr, const char **why)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
    struct addrinfo *ai = NULL;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int fd, err, port = -2;

    err = getaddrinfo(addr, "0", &hints, &ai);
    if (err != 0) {
        if (why != NULL)
            *why = gai_strerror(err);
        return -1;
    }
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        port = ntohs(ss.ss_family == AF_INET6
                         ? ((struct sockaddr_in6 *)&ss)->sin6_port
                         : ((struct sockaddr_in *)&ss)->sin_port);
    else if (why != NULL)
        *why = strerror(errno);
    if (fd >= 0)
        close(fd);
    freeaddrinfo(ai);
    return port;
}

void
tool_forget_segment(int port)
{
    ccol_comm_params p = { .mask = CCOL_COMM_PARAM_PORT |
                                   CCOL_COMM_PARAM_TOKEN,
                           .port = port, .token = getenv("CCOL_TOKEN") };

    ccol_shm_cleanup(&p);
}
