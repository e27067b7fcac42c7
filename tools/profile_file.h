/*
 * profile_file.h - the profile file of `ccol jit --profile FILE`
 * (docs/cli.md, "Profiles"): a 16-byte header, then libccol's profile (the
 * lattice wire format's state document, docs/wire-format.md):
 *
 *   offset  size  field
 *   0       8     magic "CCOLPROF"
 *   8       4     u32 little-endian version, 1
 *   12      4     u32 little-endian length of the document that follows
 *   16      len   the document (ccol_sync_profile_save's bytes)
 *
 * The header says what the file is and catches a truncated or extended
 * file; the document is checked by libccol's decoder when it is loaded.
 * Reading and writing only: libc, nothing of libccol, so the fuzz harness
 * compiles this file in.
 */
#ifndef CCOL_TOOLS_PROFILE_FILE_H
#define CCOL_TOOLS_PROFILE_FILE_H

#include <stddef.h>
#include <stdint.h>

#define PROFILE_MAGIC "CCOLPROF"
#define PROFILE_VERSION 1u
#define PROFILE_HEADER 16
/* The largest profile file read or written (a document of about 40 000
 * sources is a few MiB; libccol's decode budget stops well below this). */
#define PROFILE_MAX ((size_t)256 << 20)

/*
 * Checks the header of a file's bytes p[0..n): 0 with *doc and *len the
 * document inside (pointing into p), else -1 with `why` saying what is
 * wrong ("not a ccol profile (no CCOLPROF magic)", "version 2, this ccol
 * reads version 1", "truncated: the header announces 412 bytes of profile,
 * the file holds 100", ...).
 */
int profile_parse(const void *p, size_t n, const uint8_t **doc, size_t *len,
                  char *why, size_t whylen);

/* The bytes of a file holding document doc[0..len): malloc'd, *out_len
 * set; NULL when out of memory or len is over PROFILE_MAX. */
uint8_t *profile_encode(const void *doc, size_t len, size_t *out_len);

/*
 * Reads the file at `path`: 0 with *buf (malloc'd) and *n, 1 when there is
 * no such file (ENOENT: a cold start), -1 with `why` when it cannot be
 * read (a directory, permissions, an I/O error, larger than PROFILE_MAX).
 */
int profile_read(const char *path, uint8_t **buf, size_t *n, char *why,
                 size_t whylen);

/*
 * Writes p[0..n) to `path` atomically: a temporary made with mkstemp in the
 * file's directory, written, fsync'd, renamed over `path` (then the
 * directory is fsync'd), so a reader sees the old file or the new one,
 * never a part. 0, or -1 with `why` (the temporary is removed).
 */
int profile_write(const char *path, const void *p, size_t n, char *why,
                  size_t whylen);

#endif /* CCOL_TOOLS_PROFILE_FILE_H */
