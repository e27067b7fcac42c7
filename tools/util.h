/*
 * util.h - small helpers the subcommands share: a monotonic clock, writing
 * a whole buffer, and picking a free TCP port for a rendezvous.
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

#endif /* CCOL_TOOLS_UTIL_H */
