/*
 * util.h - small helpers the subcommands share: a monotonic clock, writing
 * a whole buffer, picking a free TCP port for a rendezvous and parsing a
 * number of seconds strictly.
 */
#ifndef CCOL_TOOLS_UTIL_H
#define CCOL_TOOLS_UTIL_H

#include <stddef.h>

/* Monotonic clock, seconds. */
double tool_now_s(void);

/* Writes all of buf to fd, retrying after signals; gives up quietly on an
 * error (a closed terminal or pipe is not the job's failure). */
void tool_write_all(int fd, const void *buf, size_t len);

/*
 * A TCP port nothing listens on now at `addr` (the kernel's choice for
 * port 0). Returns it; -1 when the address does not resolve, -2 when no
 * socket could be bound there, with *why (if not NULL) saying why.
 */
int tool_free_port(const char *addr, const char **why);

/*
 * After every rank of a local job on `port` ended: removes the shared-
 * memory segment name its rank 0 left if it died (or was stopped and
 * killed) before removing it itself, so nothing of the job stays in
 * /dev/shm. CCOL_TOKEN is read as the ranks read it.
 */
void tool_forget_segment(int port);

/* The range tool_parse_seconds accepts: the library's own for
 * CCOL_TIMEOUT (below a millisecond is a typo, 1e7 s the comm's limit). */
#define TOOL_MIN_SECONDS 0.001
#define TOOL_MAX_SECONDS 1e7

/*
 * Parses a deadline as CCOL_TIMEOUT is parsed by the library: a plain
 * decimal number (digits, optional fraction and exponent; no sign, space,
 * hex, inf or nan) in [TOOL_MIN_SECONDS, max]. Returns 0, or -1 leaving
 * *out alone.
 */
int tool_parse_seconds(const char *s, double max, double *out);

#endif /* CCOL_TOOLS_UTIL_H */
