/*
 * bench_util.c - timing, order statistics and process plumbing for the
 * benchmark suites. Percentiles interpolate linearly between closest ranks,
 * so p = 50 equals the median for odd and even sample counts alike. Child
 * programs run in their own process group so a deadline kills all of them.
 */
#include "bench_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

double
ccol_bench_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;

    return (x > y) - (x < y);
}

double
ccol_bench_pct(double *v, size_t n, double p)
{
    double pos, frac;
    size_t lo;

    if (n == 0)
        return 0.0;
    qsort(v, n, sizeof *v, cmp_double);
    if (!(p > 0.0))
        p = 0.0;
    if (p > 100.0)
        p = 100.0;
    pos = p / 100.0 * (double)(n - 1);
    lo = (size_t)pos;
    if (lo >= n - 1)
        return v[n - 1];
    frac = pos - (double)lo;
    return v[lo] + (v[lo + 1] - v[lo]) * frac;
}

double
ccol_bench_median(double *v, size_t n)
{
    return ccol_bench_pct(v, n, 50.0);
}

int
ccol_bench_free_port(const char *addr)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
    struct addrinfo *ai = NULL;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int fd, port = -1;

    if (getaddrinfo(addr, "0", &hints, &ai) != 0) {
        errno = EINVAL;
        return -1;
    }
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        port = ntohs(ss.ss_family == AF_INET6
                         ? ((struct sockaddr_in6 *)&ss)->sin6_port
                         : ((struct sockaddr_in *)&ss)->sin_port);
    if (fd >= 0)
        close(fd);
    freeaddrinfo(ai);
    return port;
}

char *
ccol_bench_exe_dir(void)
{
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    char *slash;

    if (n <= 0)
        return NULL;
    buf[n] = '\0';
    slash = strrchr(buf, '/');
    if (slash == NULL)
        return NULL;
    *slash = '\0';
    return strdup(buf[0] != '\0' ? buf : "/");
}

char *
ccol_bench_which(const char *prog)
{
    const char *path = getenv("PATH");
    char buf[4096];

    if (strchr(prog, '/') != NULL)
        return access(prog, X_OK) == 0 ? strdup(prog) : NULL;
    while (path != NULL && *path != '\0') {
        const char *colon = strchr(path, ':');
        size_t len = colon != NULL ? (size_t)(colon - path) : strlen(path);

        if (len > 0 && len + strlen(prog) + 2 <= sizeof buf) {
            memcpy(buf, path, len);
            buf[len] = '/';
            memcpy(buf + len + 1, prog, strlen(prog) + 1);
            if (access(buf, X_OK) == 0)
                return strdup(buf);
        }
        path = colon != NULL ? colon + 1 : NULL;
    }
    return NULL;
}

/* Appends what is readable on fd to *buf; false at EOF or error. */
static bool
slurp(int fd, char **buf, size_t *len, size_t *cap)
{
    char chunk[4096];
    ssize_t k = read(fd, chunk, sizeof chunk);

    if (k < 0 && (errno == EINTR || errno == EAGAIN))
        return true;
    if (k <= 0)
        return false;
    if (*len + (size_t)k + 1 > *cap) {
        size_t ncap = (*cap + (size_t)k + 1) * 2;
        char *nb = realloc(*buf, ncap);

        if (nb == NULL)
            return false;
        *buf = nb;
        *cap = ncap;
    }
    memcpy(*buf + *len, chunk, (size_t)k);
    *len += (size_t)k;
    (*buf)[*len] = '\0';
    return true;
}

/* In the child: own process group, output to the pipe, then exec. */
static void
capture_child(char *const argv[], int wfd)
{
    int nullfd = open("/dev/null", O_RDONLY);

    setpgid(0, 0);
    if (nullfd >= 0)
        dup2(nullfd, 0);
    dup2(wfd, 1);
    dup2(wfd, 2);
    execv(argv[0], argv);
    fprintf(stderr, "cannot execute %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* Reads the child's output until EOF or the deadline; false on timeout. */
static bool
capture_read(int fd, double deadline, char **out)
{
    size_t len = 0, cap = 0;
    struct pollfd p = { .fd = fd, .events = POLLIN };

    for (;;) {
        double left = deadline - ccol_bench_now();
        int r;

        if (left <= 0)
            return false;
        r = poll(&p, 1, (int)(left * 1000.0) + 1);
        if (r < 0 && errno != EINTR)
            return false;
        if (r > 0 && !slurp(fd, out, &len, &cap))
            return true;
    }
}

int
ccol_bench_capture(char *const argv[], double timeout_s, char **out)
{
    int fds[2], status = 0;
    pid_t pid;
    bool done;

    *out = NULL;
    if (pipe2(fds, O_CLOEXEC) != 0)
        return -2;
    fflush(NULL);
    pid = fork();
    if (pid == 0)
        capture_child(argv, fds[1]);
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        return -2;
    }
    setpgid(pid, pid);
    done = capture_read(fds[0], ccol_bench_now() + timeout_s, out);
    close(fds[0]);
    if (!done)
        kill(-pid, SIGKILL);
    if (waitpid(pid, &status, 0) != pid || !done)
        return -1;
    if (*out == NULL)
        *out = strdup("");
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}
