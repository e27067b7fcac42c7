/*
 * ccol.h - compiler collectives: the public API of libccol.
 *
 * In an SPMD job every rank compiles the same program on its own. libccol lets
 * those compilers exchange what they observed and merge it the same way, so
 * every rank makes the same compile decisions at the same compile.
 *
 * This header is the manual. It has four parts:
 *   1. status codes, versions, logging and memory;
 *   2. the communicator (ccol_comm): small byte collectives with deadlines,
 *      named failures and desync detection, over inproc threads or TCP;
 *   3. the automatic-dynamic lattice and the compile collective (ccol_sync,
 *      ccol_compile), with PyTorch's semantics made safe;
 *   4. decision helpers (sharded autotuning, estimate alignment, divergence
 *      checks, agreement on a flag).
 *
 * Conventions. Every fallible call returns ccol_status (0 ok, < 0 error) and
 * leaves a human-readable message on the handle it was called on, readable
 * with ccol_comm_errmsg() / ccol_sync_errmsg(). Outputs are written only on
 * success. Arguments are borrowed for the duration of a call; memory the
 * library returns is freed with ccol_free(). A handle is used by one thread at
 * a time. The library never exits, never aborts on bad input and never prints
 * unless a log callback is installed.
 */
#ifndef CCOL_H
#define CCOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(CCOL_BUILDING) && defined(__GNUC__)
#define CCOL_API __attribute__((visibility("default")))
#else
#define CCOL_API
#endif

/* ------------------------------------------------------------------------ */
/* 1. Status, versions, logging, memory                                      */
/* ------------------------------------------------------------------------ */

#define CCOL_VERSION_MAJOR 0
#define CCOL_VERSION_MINOR 1
#define CCOL_VERSION_PATCH 0
#define CCOL_VERSION_HEX                                                      \
    ((CCOL_VERSION_MAJOR << 16) | (CCOL_VERSION_MINOR << 8) |                 \
     CCOL_VERSION_PATCH)

/* Version of the bytes ranks exchange. Ranks with different protocol
 * versions refuse each other with CCOL_ERR_VERSION. */
#define CCOL_PROTOCOL_VERSION 1

typedef enum ccol_status {
    CCOL_OK = 0,
    CCOL_ERR_INVALID_ARG = -1, /* a bad argument from the caller */
    CCOL_ERR_NO_MEMORY = -2,   /* an allocation failed */
    CCOL_ERR_TIMEOUT = -3,     /* a deadline passed; message names ranks */
    CCOL_ERR_PEER = -4,        /* a remote rank failed or sent bad data */
    CCOL_ERR_DIVERGED = -5,    /* ranks disagree about what they are doing */
    CCOL_ERR_VERSION = -6,     /* different library or protocol versions */
    CCOL_ERR_CLOSED = -7,      /* connection closed or handle shut down */
    CCOL_ERR_BUSY = -8,        /* resource in use */
    CCOL_ERR_IO = -9,          /* a local system call failed */
    CCOL_ERR_INTERNAL = -100   /* a bug in libccol */
} ccol_status;

/* Returns the static upper-case name of a status ("OK", "TIMEOUT",
 * "DIVERGED", ...), or "UNKNOWN" for values not listed above. */
CCOL_API const char *ccol_status_name(ccol_status st);

/* Returns a static one-line description of a status. */
CCOL_API const char *ccol_status_str(ccol_status st);

/* Returns CCOL_VERSION_HEX of the library actually linked. */
CCOL_API unsigned ccol_version(void);

/* Returns the library version as "major.minor.patch". */
CCOL_API const char *ccol_version_string(void);

/* Returns CCOL_PROTOCOL_VERSION of the library actually linked. */
CCOL_API unsigned ccol_protocol_version(void);

/* Frees memory returned by libccol (results of collectives, rendered
 * strings). NULL is a no-op. */
CCOL_API void ccol_free(void *p);

typedef enum ccol_log_level {
    CCOL_LOG_ERROR = 0,
    CCOL_LOG_WARN = 1,
    CCOL_LOG_INFO = 2,
    CCOL_LOG_DEBUG = 3
} ccol_log_level;

/* A log callback. `component` is "comm", "sync", ... and `msg` is one line
 * without a newline that already names the rank ("rank 1/4: ..."). */
typedef void (*ccol_log_fn)(void *ud, ccol_log_level level,
                            const char *component, const char *msg);

/* Installs the process-wide log callback (NULL: silent, the default) and the
 * most verbose level passed to it. Thread-safe. */
CCOL_API void ccol_log_set(ccol_log_fn fn, void *ud, ccol_log_level max_level);

/* A ready-made callback that writes "ccol <level> <component>: <msg>" lines
 * to stderr. */
CCOL_API void ccol_log_stderr(void *ud, ccol_log_level level,
                              const char *component, const char *msg);

/* ------------------------------------------------------------------------ */
/* 2. The communicator                                                       */
/* ------------------------------------------------------------------------ */

/*
 * A ccol_comm connects the `size` ranks of a job. Its operations move small
 * byte blobs (the control plane of a compiler, not tensors). Every operation
 * is collective: every rank calls the same operations in the same order.
 *
 * Guarantees:
 * - Results are bit-identical on every rank.
 * - Every operation has a deadline (params.timeout_s, else CCOL_TIMEOUT in
 *   seconds, else 300 s). On expiry every live rank returns CCOL_ERR_TIMEOUT
 *   with the same message naming the ranks that did not arrive and what each
 *   was last doing (its last operation and label).
 * - A rank that calls a different operation at the same position gets, like
 *   every other rank, CCOL_ERR_DIVERGED naming both sides.
 * - Corrupt, truncated or oversized bytes give CCOL_ERR_PEER naming the
 *   sender; a different protocol version gives CCOL_ERR_VERSION.
 * - After a failed operation the communicator is poisoned: later operations
 *   fail at once with the same status and message.
 */
typedef struct ccol_comm ccol_comm;

typedef enum ccol_transport {
    CCOL_TRANSPORT_DEFAULT = 0, /* tcp for size > 1, else a local comm */
    CCOL_TRANSPORT_INPROC = 1,  /* threads of one process are the ranks */
    CCOL_TRANSPORT_TCP = 2,     /* processes on one or many hosts */
    CCOL_TRANSPORT_OOB = 3      /* reserved: the caller's communicator */
} ccol_transport;

/* Field bits of ccol_comm_params.mask: a field is used only when its bit is
 * set; every other field takes its default. */
#define CCOL_COMM_PARAM_RANK (1u << 0)
#define CCOL_COMM_PARAM_SIZE (1u << 1)
#define CCOL_COMM_PARAM_TRANSPORT (1u << 2)
#define CCOL_COMM_PARAM_ADDR (1u << 3)
#define CCOL_COMM_PARAM_PORT (1u << 4)
#define CCOL_COMM_PARAM_TIMEOUT (1u << 5)
#define CCOL_COMM_PARAM_MAX_PAYLOAD (1u << 6)
#define CCOL_COMM_PARAM_TOKEN (1u << 7)
#define CCOL_COMM_PARAM_NAME (1u << 8)
#define CCOL_COMM_PARAM_TREE_THRESHOLD (1u << 9)
#define CCOL_COMM_PARAM_TREE_FANOUT (1u << 10)

typedef struct ccol_comm_params {
    uint64_t mask;        /* CCOL_COMM_PARAM_* bits of the fields set */
    int rank;             /* this rank, 0 <= rank < size */
    int size;             /* number of ranks, >= 1 */
    ccol_transport transport; /* default: tcp when size > 1 */
    const char *addr;     /* tcp: rendezvous host (default 127.0.0.1) */
    int port;             /* tcp: rendezvous port on rank 0 (required) */
    double timeout_s;     /* deadline of each operation, > 0 */
    size_t max_payload;   /* largest accepted message (default 64 MiB) */
    const char *token;    /* job token; peers without it are refused */
    const char *name;     /* inproc: group name the threads join */
    int tree_threshold;   /* above this size use a tree (default 16) */
    int tree_fanout;      /* children per node of the tree (default 4) */
} ccol_comm_params;

/*
 * Creates a communicator and, for size > 1, waits (within the deadline) until
 * every rank has joined. Validates that exactly `size` distinct ranks with the
 * same size, protocol version and token joined.
 *
 * On success *out is the communicator. On failure *out is either NULL (no
 * memory) or a poisoned communicator whose ccol_comm_errmsg() says what went
 * wrong; destroy it either way.
 *
 * inproc: every thread passes the same `name` and `size`; threads of one
 * group rendezvous in process memory.
 * tcp: rank 0 listens on addr:port and acts as the rendezvous; other ranks
 * connect (retrying until the deadline, so start order does not matter).
 */
CCOL_API ccol_status ccol_comm_create(const ccol_comm_params *params,
                                      ccol_comm **out);

/*
 * Creates a communicator from the launcher's environment. Rank and size come
 * from the first complete set of: torchrun's RANK/WORLD_SIZE (with
 * MASTER_ADDR/MASTER_PORT), Open MPI's OMPI_COMM_WORLD_RANK/SIZE, PMI's
 * PMI_RANK/PMI_SIZE, Slurm's SLURM_PROCID/SLURM_NTASKS (last: a launcher
 * inside a batch job inherits Slurm's values). A set with a value that is not
 * a number, or a rank outside the size, is CCOL_ERR_INVALID_ARG naming the
 * variable. No set at all gives a single-rank communicator. CCOL_TIMEOUT,
 * CCOL_TOKEN, CCOL_TRANSPORT, MASTER_ADDR and MASTER_PORT are read too.
 * Fields set in `overrides` (may be NULL) win over the environment.
 */
CCOL_API ccol_status ccol_comm_create_env(const ccol_comm_params *overrides,
                                          ccol_comm **out);

/*
 * Bring your own communicator: an out-of-band all-gather in the style of
 * UCC's ucc_oob_coll_t. A framework that already has MPI, NCCL's bootstrap,
 * Gloo or its own store fills this table; every ccol operation is derived
 * from it (two fixed-size all-gathers per operation: a header record, then
 * the payloads padded to the largest), with the same fingerprints, deadlines
 * and error reports as the other transports. ccol keeps at most one request
 * in flight and polls test() with a growing sleep, never spinning.
 */
typedef struct ccol_oob {
    /* Starts an all-gather of exactly `len` bytes from every rank into
     * `recv` (rank r's bytes at recv + r * len). Returns 0 and sets *req
     * when posted, nonzero on failure. */
    int (*allgather)(void *ctx, const void *send, void *recv, size_t len,
                     void **req);
    /* Returns 1 when the request completed, 0 while in progress, < 0 when
     * it failed. */
    int (*test)(void *ctx, void *req);
    /* Releases a request. Called after completion; after a failure or a
     * deadline ccol calls it when the communicator is destroyed, and the
     * buffers stay alive until then. */
    void (*free)(void *ctx, void *req);
    /* Called once when the communicator is destroyed; may be NULL. */
    void (*release)(void *ctx);
    int rank;  /* this rank in [0, size) */
    int size;  /* number of ranks */
    void *ctx; /* passed back to every callback */
} ccol_oob;

/*
 * Creates a communicator over `oob` (copied; ctx is borrowed until destroy).
 * `params` may be NULL; its rank, size and transport fields are ignored,
 * timeout, token, max_payload and name (a communicator id) are honoured.
 * Returns like ccol_comm_create().
 */
CCOL_API ccol_status ccol_comm_create_oob(const ccol_oob *oob,
                                          const ccol_comm_params *params,
                                          ccol_comm **out);

/* Closes connections and frees the communicator. NULL is a no-op. */
CCOL_API void ccol_comm_destroy(ccol_comm *comm);

/* The message of the last failure on `comm` (empty if none). Owned by the
 * handle, valid until the next call on it. */
CCOL_API const char *ccol_comm_errmsg(const ccol_comm *comm);

/* The status of the last failure on `comm`, CCOL_OK if none. */
CCOL_API ccol_status ccol_comm_status(const ccol_comm *comm);

CCOL_API int ccol_comm_rank(const ccol_comm *comm);
CCOL_API int ccol_comm_size(const ccol_comm *comm);

/* The name of the transport in use: "local", "inproc", "tcp" or "oob". */
CCOL_API const char *ccol_comm_transport(const ccol_comm *comm);

/* The deadline of each operation, in seconds. */
CCOL_API double ccol_comm_timeout(const ccol_comm *comm);

/* Changes the deadline of later operations (seconds, > 0). */
CCOL_API ccol_status ccol_comm_set_timeout(ccol_comm *comm, double seconds);

/*
 * Sets a short label (up to 43 bytes kept) that travels with this rank's
 * next operations and appears in other ranks' error messages, e.g.
 * "compile exchange f (compile 2)". NULL clears it.
 */
CCOL_API void ccol_comm_set_label(ccol_comm *comm, const char *label);

/* Number of operations completed or failed on this communicator. */
CCOL_API uint64_t ccol_comm_seq(const ccol_comm *comm);

/* Bytes this rank has sent and received on the wire (or through memory for
 * inproc), headers included. */
CCOL_API void ccol_comm_traffic(const ccol_comm *comm, uint64_t *sent,
                                uint64_t *received);

/*
 * Gathers every rank's blob on every rank. `data` may be NULL when len is 0.
 * On success *out holds the blobs concatenated in rank order (NULL when all
 * are empty; free with ccol_free) and lens[r] is rank r's length (`lens` has
 * room for size entries).
 */
CCOL_API ccol_status ccol_allgatherv(ccol_comm *comm, const void *data,
                                     size_t len, void **out, size_t *lens);

/*
 * Broadcasts root's blob. `data`/`len` are read on the root only. On success
 * every rank (root too) gets a copy in *out (NULL when empty; ccol_free) and
 * its length in *out_len. Ranks passing different roots get DIVERGED.
 */
CCOL_API ccol_status ccol_bcast(ccol_comm *comm, int root, const void *data,
                                size_t len, void **out, size_t *out_len);

typedef enum ccol_op {
    CCOL_OP_SUM = 0,
    CCOL_OP_MIN = 1,
    CCOL_OP_MAX = 2,
    CCOL_OP_AND = 3, /* int64: bitwise and; double: logical (result 0 or 1) */
    CCOL_OP_OR = 4   /* int64: bitwise or;  double: logical (result 0 or 1) */
} ccol_op;

/*
 * Reduces `n` values element-wise across ranks, in place. The reduction runs
 * in rank order in one place, so double sums are bit-identical on every rank.
 * Ranks passing a different `n` or `op` get DIVERGED. Integer sums wrap.
 */
CCOL_API ccol_status ccol_allreduce_i64(ccol_comm *comm, int64_t *values,
                                        size_t n, ccol_op op);
CCOL_API ccol_status ccol_allreduce_f64(ccol_comm *comm, double *values,
                                        size_t n, ccol_op op);

/*
 * Combines two blobs into one, allocated with malloc() into *out and
 * *out_len (*out may be NULL for an empty result). Must be associative and
 * commutative on the bytes it produces, and pure (called on whichever rank
 * reduces, possibly several times, with blobs that crossed the wire: decode
 * them defensively). Returning an error fails the operation on every rank
 * with CCOL_ERR_PEER (CCOL_ERR_NO_MEMORY stays as is) and a message naming
 * the subtree whose contribution could not be combined.
 */
typedef ccol_status (*ccol_combine_fn)(void *ud, const void *a, size_t alen,
                                       const void *b, size_t blen, void **out,
                                       size_t *out_len);

/*
 * Join-reduce: folds every rank's blob with `combine` and gives every rank
 * the same result (*out, ccol_free; *out_len). Each rank receives O(result)
 * bytes, not O(ranks x blob). `key` is a fingerprint both sides must agree
 * on (ranks with different keys get DIVERGED); pass 0 if unused.
 */
CCOL_API ccol_status ccol_join_reduce(ccol_comm *comm, uint64_t key,
                                      const void *data, size_t len,
                                      ccol_combine_fn combine, void *ud,
                                      void **out, size_t *out_len);

/* Returns when every rank has called it (or fails on the deadline). */
CCOL_API ccol_status ccol_barrier(ccol_comm *comm);

/* ------------------------------------------------------------------------ */
/* 3. Automatic dynamic shapes and the compile collective                    */
/* ------------------------------------------------------------------------ */

/*
 * A ccol_sync holds the compiler-collective state of one job on one rank:
 * for each frame (code id) and each input source (a string such as "L['x']"
 * or "L['xs'][1]") an automatic-dynamic entry {scalar, size, stride} with
 * PyTorch's lattice semantics (see docs/lattice.md).
 *
 * One compile of a frame runs:
 *   ccol_compile_begin(sync, code_id, &c)
 *   preflight trace:  ccol_compile_observe_*() for each input it reads,
 *                     ccol_compile_mark_*() for user marks
 *   ccol_compile_exchange(c)   one collective; every rank's observations
 *                              are folded (rank order) into the frame state
 *   the compiler restarts its trace and asks ccol_compile_decide_*() /
 *   ccol_compile_is_*_dynamic() for each dim and scalar
 *   ccol_compile_finish(c)     fails if no exchange happened
 *
 * With no communicator (or mode off) the exchange folds only this rank's
 * observations, which is PyTorch's single-process automatic dynamic.
 */
typedef struct ccol_sync ccol_sync;
typedef struct ccol_compile ccol_compile;

typedef enum ccol_sync_mode {
    CCOL_SYNC_OFF = 0,     /* each rank alone */
    CCOL_SYNC_COMPILE = 1, /* compile collectives */
    CCOL_SYNC_LOCKSTEP = 2 /* compile collectives + guard collectives */
} ccol_sync_mode;

#define CCOL_SYNC_PARAM_MODE (1u << 0)
#define CCOL_SYNC_PARAM_COMM (1u << 1)

typedef struct ccol_sync_params {
    uint64_t mask;        /* CCOL_SYNC_PARAM_* bits of the fields set */
    ccol_sync_mode mode;  /* default: lockstep when comm size > 1 */
    ccol_comm *comm;      /* borrowed; must outlive the sync; may be NULL */
} ccol_sync_params;

CCOL_API ccol_status ccol_sync_create(const ccol_sync_params *params,
                                      ccol_sync **out);
CCOL_API void ccol_sync_destroy(ccol_sync *sync);
CCOL_API const char *ccol_sync_errmsg(const ccol_sync *sync);
CCOL_API ccol_sync_mode ccol_sync_get_mode(const ccol_sync *sync);

/* Number of compile collectives this rank has run. */
CCOL_API uint64_t ccol_sync_exchanges(const ccol_sync *sync);

/*
 * Starts a compile of frame `code_id` (copied). Only one compile may be open
 * per sync at a time. The per-frame compile index starts at 1.
 */
CCOL_API ccol_status ccol_compile_begin(ccol_sync *sync, const char *code_id,
                                        ccol_compile **out);

/* Records an observation of a tensor input: `ndim` sizes and strides
 * (strides may be NULL for contiguous). Last write per source wins. */
CCOL_API ccol_status ccol_compile_observe_tensor(ccol_compile *c,
                                                 const char *source, int ndim,
                                                 const int64_t *sizes,
                                                 const int64_t *strides);
/* Records an observation of an int or float input. */
CCOL_API ccol_status ccol_compile_observe_int(ccol_compile *c,
                                              const char *source, int64_t v);
CCOL_API ccol_status ccol_compile_observe_float(ccol_compile *c,
                                                const char *source, double v);

/* User marks. mark_dynamic enters the exchange (so it reaches every rank);
 * mark_static stays on this rank and wins over automatic dynamic. */
CCOL_API ccol_status ccol_compile_mark_dynamic(ccol_compile *c,
                                               const char *source, int dim);
CCOL_API ccol_status ccol_compile_mark_static(ccol_compile *c,
                                              const char *source, int dim);

/* Runs the compile collective (exactly once per compile). */
CCOL_API ccol_status ccol_compile_exchange(ccol_compile *c);

typedef enum ccol_decision {
    CCOL_STATIC = 0,        /* specialize to the value, guard equality */
    CCOL_DYNAMIC = 1,       /* make a symbol, guard >= 2 */
    CCOL_SPECIALIZED_01 = 2 /* dynamic, but the value is 0 or 1 here */
} ccol_decision;

/* Decisions after the exchange, for a dim of a tensor source with its
 * current value, or for a scalar source. Unknown sources are static. */
CCOL_API ccol_status ccol_compile_decide_size(ccol_compile *c,
                                              const char *source, int dim,
                                              int64_t value,
                                              ccol_decision *out);
CCOL_API ccol_status ccol_compile_decide_stride(ccol_compile *c,
                                                const char *source, int dim,
                                                ccol_decision *out);
CCOL_API ccol_status ccol_compile_decide_scalar(ccol_compile *c,
                                                const char *source,
                                                int64_t value,
                                                ccol_decision *out);

/*
 * Explains the decision for `what` ("L['x'].size(0)", "L['x'].stride(1)" or
 * "L['y']") in one line such as "L['x'].size(0) dynamic: 5 on rank 0, 6 on
 * rank 1". *out is malloc'd (ccol_free).
 */
CCOL_API ccol_status ccol_compile_explain(ccol_compile *c, const char *what,
                                          char **out);

/* Ends the compile; fails with CCOL_ERR_INTERNAL if no exchange happened
 * (pass ok=false to abandon a compile that failed for other reasons). Frees
 * `c`. */
CCOL_API ccol_status ccol_compile_finish(ccol_compile *c, bool ok);

/* Renders the frame state of `code_id` as PyTorch's LocalState does:
 * one "<source>: <entry render>" line per source, sorted. ccol_free. */
CCOL_API ccol_status ccol_sync_render(ccol_sync *sync, const char *code_id,
                                      char **out);

/*
 * Guard collective (lockstep mode): every rank says whether its guards hit
 * for frame `code_id`; *all_hit is true only if every rank hit. Ranks at
 * different frames get DIVERGED. In other modes *all_hit = hit, no traffic.
 */
CCOL_API ccol_status ccol_sync_guard(ccol_sync *sync, const char *code_id,
                                     bool hit, bool *all_hit);

/* ------------------------------------------------------------------------ */
/* 4. Decision helpers                                                        */
/* ------------------------------------------------------------------------ */

/* Benchmarks candidate `index`; writes its cost (lower is better) or returns
 * false if the candidate failed. */
typedef bool (*ccol_bench_fn)(void *ud, size_t index, double *cost);

/*
 * Sharded autotuning: candidate i is benchmarked by rank i % size; costs are
 * exchanged; the winner is the lowest cost, ties to the lowest index; failed
 * candidates cost +inf. All failed is CCOL_ERR_INVALID_ARG on every rank.
 * `costs` (may be NULL) receives all n costs.
 */
CCOL_API ccol_status ccol_agree_choice(ccol_comm *comm, size_t n,
                                       ccol_bench_fn bench, void *ud,
                                       size_t *winner, double *costs);

/* Element-wise median of every rank's `n` doubles (mean of the two middle
 * values for an even count), in place; different n is DIVERGED. */
CCOL_API ccol_status ccol_align(ccol_comm *comm, double *values, size_t n);

/*
 * Divergence check: each rank supplies a digest and a short text summary
 * (lines separated by '\n'). If digests differ every rank gets DIVERGED with
 * the ranks grouped by digest and the first differing summary lines.
 */
CCOL_API ccol_status ccol_verify(ccol_comm *comm, uint64_t digest,
                                 const char *summary);

/* *all = flag is true on every rank. */
CCOL_API ccol_status ccol_agree_all(ccol_comm *comm, bool flag, bool *all);

#ifdef __cplusplus
}
#endif
#endif /* CCOL_H */
