/*
 * ccol.h - compiler collectives: the public API of libccol.
 *
 * In an SPMD job every rank compiles the same program on its own. libccol lets
 * those compilers exchange what they observed and merge it the same way, so
 * every rank makes the same compile decisions at the same compile.
 *
 * This header is the manual. Its parts:
 *   1. status codes, versions, logging and memory;
 *   2. the communicator (ccol_comm): small byte collectives with deadlines,
 *      named failures and desync detection, over inproc threads, TCP, or
 *      the caller's own all-gather (oob; MPI through ccol_mpi.h);
 *   3. the automatic-dynamic lattice and the compile collective (ccol_sync,
 *      ccol_compile), with PyTorch's semantics made safe;
 *   3b. the lattice on its own (ccol_dyn), for offline merges and tools;
 *   4. decision helpers (sharded autotuning, estimate alignment, divergence
 *      checks, agreement on a flag);
 *   5. the trace log (CCOL_TRACE).
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
 * versions refuse each other with CCOL_ERR_VERSION. Version 4: a 72-byte
 * frame header, labels of up to CCOL_LABEL_MAX bytes travel whole, and
 * tcp connections of a job with a token authenticate both ways (every
 * field of the HELLO under its MAC) and tag every frame (docs/comm.md
 * "Frames" has the layout and the history). */
#define CCOL_PROTOCOL_VERSION 4

/*
 * Bounds of the names in messages. A label (ccol_comm_set_label), a code
 * id or a source name of up to CCOL_LABEL_MAX bytes appears whole in every
 * message on every rank; a longer one is cut to its first bytes followed
 * by "..." (never inside a UTF-8 character). A message (the *_errmsg()
 * functions) holds up to CCOL_ERRMSG_MAX - 1 bytes; a longer one, e.g. a
 * timeout naming many missing ranks, ends with "...".
 */
#define CCOL_LABEL_MAX 512
#define CCOL_ERRMSG_MAX 4096

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
    CCOL_ERR_INTERRUPTED = -10, /* the caller's interrupt hook said stop */
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

/* Writes the SHA-256 (FIPS 180-4) of data[0..len) into out[32]: the
 * digest libccol uses itself (profile agreement, token HMACs), so the
 * tools and the bindings need no second one. data may be NULL when len is
 * 0. */
CCOL_API void ccol_sha256(const void *data, size_t len,
                          unsigned char out[32]);

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

/*
 * The transports. ccol_comm_transport() names the one in use: "local" (a
 * single rank), "inproc", "tcp", "shm", "tcp+shm" (a tcp job whose hosts
 * run several ranks each: shared memory within a host and tcp between one
 * leader per host, chosen by ccol itself; CCOL_HIER=0 keeps flat tcp) or
 * "oob" (ccol_comm_create_oob, and the MPI adapter built on it).
 */
typedef enum ccol_transport {
    CCOL_TRANSPORT_DEFAULT = 0, /* tcp for size > 1, else a local comm */
    CCOL_TRANSPORT_INPROC = 1,  /* threads of one process are the ranks */
    CCOL_TRANSPORT_TCP = 2,     /* processes on one or many hosts
                                   (tcp+shm where hosts run several) */
    CCOL_TRANSPORT_OOB = 3,     /* reserved: ccol_comm_create_oob */
    CCOL_TRANSPORT_SHM = 4      /* processes of one host, shared memory */
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
#define CCOL_COMM_PARAM_FAULT (1u << 11)
#define CCOL_COMM_PARAM_INTERRUPT (1u << 12)

/*
 * An interrupt hook: returns nonzero when the operation waiting on this
 * thread should stop (for example because the user pressed Ctrl-C). While
 * an operation or the creation of a communicator waits, the library calls
 * the hook on the waiting thread about every 50 ms (never during an
 * operation that completes sooner). When it returns nonzero the operation
 * fails with CCOL_ERR_INTERRUPTED, "... interrupted by the caller", and the
 * communicator is poisoned: the other ranks see this rank leave or time out
 * as usual.
 */
typedef int (*ccol_interrupt_fn)(void *ud);

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
    const char *name;     /* inproc: group name the threads join;
                             shm: job name (default: from the port) */
    int tree_threshold;   /* above this size use a tree (default 64) */
    int tree_fanout;      /* children per node of the tree (default 4) */
    const char *fault;    /* fault injection spec (docs/reliability.md);
                             default: CCOL_FAULT, else none */
    ccol_interrupt_fn interrupt; /* see ccol_interrupt_fn; default none */
    void *interrupt_ud;   /* passed to interrupt */
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
 * shm: processes of one host; every rank passes the same `name` (or, without
 * one, the same `port`, which then only names the job). Rank 0 creates the
 * shared-memory segment, the others map it (retrying until the deadline); a
 * segment left by a crashed job is replaced, one whose rank 0 is alive gives
 * CCOL_ERR_BUSY. Waits spin briefly (CCOL_SPIN_US, default 100), then
 * sleep in the kernel; a rank that dies is named on its tree neighbours.
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
 * CCOL_TOKEN, MASTER_ADDR and MASTER_PORT are read too, and CCOL_TRANSPORT
 * picks the transport by name: "tcp", "shm" (processes of one host, named
 * by MASTER_PORT) or "inproc" (ranks that are threads of one process,
 * meeting in the group `name` of the overrides, default "env"); unset or
 * empty means the default. Any other value is
 * CCOL_ERR_INVALID_ARG naming it and the accepted names.
 * Fields set in `overrides` (may be NULL) win over the environment.
 */
CCOL_API ccol_status ccol_comm_create_env(const ccol_comm_params *overrides,
                                          ccol_comm **out);

/*
 * For a launcher of local shm ranks, once every rank has ended: removes
 * the shared-memory segment name the job of `params` (its `name`, else
 * "port-<port>", and its `token`, as ccol_comm_create derives them) left
 * behind because its rank 0 was killed before removing it. Never the name
 * of a job whose rank 0 lives, never another user's. Returns 1 when a
 * name was removed, 0 otherwise (nothing there, or not removable).
 */
CCOL_API int ccol_shm_cleanup(const ccol_comm_params *params);

/*
 * Removes this user's shared-memory segment names whose job name starts
 * with `prefix` (1 to 32 of A-Z a-z 0-9 . _ -; anything else removes
 * nothing) and whose rank 0 is gone: what jobs with random names left
 * when their rank 0 was killed while they formed. A segment whose rank 0
 * lives, that is not ready yet, or that is another user's is never
 * touched. Returns how many names were removed. (ccol.torch calls it
 * with "torch-" before rank 0 creates a job's segment.)
 */
CCOL_API unsigned ccol_shm_sweep(const char *prefix);

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
    /* Called once when the communicator is destroyed by the process that
     * created it (never in a forked child); may be NULL. */
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

/*
 * A sub-communicator: ranks members[0..n-1] of `parent` (distinct, in
 * increasing order, this rank among them) as a communicator of their own,
 * in which members[r] is rank r. Only the members call it, each with the
 * same members and name, and no other rank takes part or waits: ranks that
 * run other code (another pipeline stage) go on undisturbed. It has the
 * parent's transport (inproc, shm and tcp jobs; the sub of a tcp+shm job
 * is grouped by host again, or shm alone when its members share one host),
 * deadline, max_payload, token and tree parameters, and a communicator id
 * of its own (from the parent's, `name` and the members), so frames of two
 * subs never mix. Its messages name ranks by their rank in `parent`.
 * A failure of the sub never poisons the parent, nor the parent's the sub;
 * each is destroyed on its own, in any order. Injected faults (CCOL_FAULT)
 * apply to the job's communicator only.
 * name: up to 64 printable bytes (NULL is ""). Refused with
 * CCOL_ERR_INVALID_ARG: an oob parent (create one over the sub-group's own
 * all-gather), a parent that is itself a sub (name the members by their
 * rank in the job's communicator), a bad member list. Members that do not
 * all arrive within the deadline give CCOL_ERR_TIMEOUT naming the missing
 * ones. On failure *out is still a communicator to read the message from
 * and destroy (NULL only when memory ran out or an argument was invalid,
 * then the message is on `parent`).
 */
CCOL_API ccol_status ccol_comm_create_sub(ccol_comm *parent,
                                          const int *members, int n,
                                          const char *name, ccol_comm **out);

/* Closes connections and frees the communicator. NULL is a no-op. In a
 * forked child (a process other than the one that created it) it releases
 * only the child's memory and descriptors and touches nothing the job
 * shares; any operation there fails with CCOL_ERR_INVALID_ARG. */
CCOL_API void ccol_comm_destroy(ccol_comm *comm);

/* The message of the last failure on `comm` (empty if none). Owned by the
 * handle, valid until the next call on it. */
CCOL_API const char *ccol_comm_errmsg(const ccol_comm *comm);

/* The status of the last failure on `comm`, CCOL_OK if none. */
CCOL_API ccol_status ccol_comm_status(const ccol_comm *comm);

CCOL_API int ccol_comm_rank(const ccol_comm *comm);
CCOL_API int ccol_comm_size(const ccol_comm *comm);

/* The name of the transport in use: "local", "inproc", "tcp", "shm",
 * "tcp+shm" or "oob" (see ccol_transport). */
CCOL_API const char *ccol_comm_transport(const ccol_comm *comm);

/* The deadline of each operation, in seconds. */
CCOL_API double ccol_comm_timeout(const ccol_comm *comm);

/* Changes the deadline of later operations (seconds, > 0). */
CCOL_API ccol_status ccol_comm_set_timeout(ccol_comm *comm, double seconds);

/*
 * Sets a label that travels with this rank's next operations and leads
 * their description in every rank's error messages, e.g. "exchange for
 * compile 2 of f (join_reduce #4)". Up to CCOL_LABEL_MAX bytes are kept
 * whole; a longer label keeps its first bytes followed by "...". Other
 * ranks show it with control characters replaced by '?'. NULL clears it.
 */
CCOL_API void ccol_comm_set_label(ccol_comm *comm, const char *label);

/* Installs (or with NULL removes) the interrupt hook of later operations;
 * see ccol_interrupt_fn. */
CCOL_API void ccol_comm_set_interrupt(ccol_comm *comm, ccol_interrupt_fn fn,
                                      void *ud);

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
 * *out_len (*out may be NULL for an empty result). Must be associative on
 * the bytes it produces (blobs are folded in rank order on every transport
 * and tree shape, so it need not be commutative), and pure (called on
 * whichever rank reduces, possibly several times, with blobs that crossed
 * the wire: decode them defensively). Returning an error fails the operation on every rank
 * with CCOL_ERR_PEER (CCOL_ERR_NO_MEMORY stays as is) and a message naming
 * the subtree whose contribution could not be combined. Over shm and
 * inproc (within the tree threshold) every rank folds the same blobs in
 * rank order, so that holds because the combine is pure; a rank whose
 * combine alone fails (out of memory) fails alone, and the other ranks'
 * next operation fails at once naming it (docs/comm.md).
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
 * PyTorch's lattice semantics (docs/lattice.md), plus a per-frame compile
 * index and a job-wide count of compile exchanges. docs/protocol.md
 * describes the protocol.
 *
 * One compile of a frame (first compile, every recompile, every resume
 * frame after a graph break) runs:
 *
 *   ccol_compile_begin(sync, code_id, &c)      compile index k of the frame
 *   preflight trace:  ccol_compile_observe_*() for each input it reads
 *                     (last write per source wins),
 *                     ccol_compile_mark_*() for user marks; decisions asked
 *                     now are static except this rank's mark_dynamic dims
 *   ccol_compile_exchange(c)   at the first graph emission (even an empty
 *                              partial graph): ONE collective; every rank's
 *                              observations are folded, in rank order, into
 *                              the persistent frame state
 *   the compiler restarts its trace (it may observe the same inputs again:
 *   ignored) and asks ccol_compile_decide_*() for each dim and scalar
 *   ccol_compile_finish(c, ok)  fails if no exchange happened
 *
 * Modes. CCOL_SYNC_COMPILE and CCOL_SYNC_LOCKSTEP with a communicator of
 * size > 1 run the exchange as one join-reduce over the communicator. With
 * CCOL_SYNC_OFF, no communicator or a single rank, the exchange folds only
 * this rank's observations (PyTorch's single-process automatic dynamic); it
 * must still be called once per compile.
 *
 * What the exchange guarantees (modes compile and lockstep):
 * - Pairing: each rank's exchange carries the code id, the compile index
 *   and the job-wide exchange number. If any differ, every rank gets
 *   CCOL_ERR_DIVERGED with the same message, e.g. "rank 1 is compiling g
 *   (compile 1) while rank 0 is compiling f (compile 1)"; nothing is
 *   merged and the communicator stays usable.
 * - Consistent prior state: the exchange carries a digest of each rank's
 *   frame state; when digests differ (different profiles or histories) the
 *   persistent state becomes the join of every rank's state, with a
 *   warning logged, so decisions still agree.
 * - The result equals folding every rank's observations in rank order
 *   (ranks without a source contribute nothing), bit for bit, on every
 *   rank; each rank receives O(state) bytes, not O(ranks x state).
 * - Deadlines: a rank that never arrives gives CCOL_ERR_TIMEOUT naming it
 *   on every other rank; communicator failures (TIMEOUT, PEER, DIVERGED,
 *   VERSION) are passed through with the communicator's message, prefixed
 *   with "compile exchange of <code id> (compile k): ".
 *
 * Errors of ccol_compile_*() calls are left on the sync handle: read them
 * with ccol_sync_errmsg(). A sync and its compiles are used by one thread
 * at a time.
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
    ccol_sync_mode mode;  /* default: lockstep when comm size > 1, else off */
    ccol_comm *comm;      /* borrowed; must outlive the sync; may be NULL */
} ccol_sync_params;

/*
 * Creates a sync handle (params may be NULL: no communicator, mode off).
 * On failure *out is NULL (no memory) or a handle whose ccol_sync_errmsg()
 * says what was wrong (an unknown mode is CCOL_ERR_INVALID_ARG); destroy it
 * either way.
 */
CCOL_API ccol_status ccol_sync_create(const ccol_sync_params *params,
                                      ccol_sync **out);

/* Frees the sync and a compile still open on it. NULL is a no-op. The
 * communicator is not touched. */
CCOL_API void ccol_sync_destroy(ccol_sync *sync);

/* The message of the last failure of the sync or of one of its compiles
 * (empty if none). Owned by the handle. */
CCOL_API const char *ccol_sync_errmsg(const ccol_sync *sync);

CCOL_API ccol_sync_mode ccol_sync_get_mode(const ccol_sync *sync);

/* Number of compile collectives this rank has run over the communicator
 * (0 in mode off or on a single rank; local exchanges are not counted). */
CCOL_API uint64_t ccol_sync_exchanges(const ccol_sync *sync);

/*
 * Starts compile k of frame `code_id` (copied; at most 4096 bytes). The
 * per-frame compile index k counts begun compiles, from 1, abandoned ones
 * included. Only one compile may be open per sync at a time: a second
 * begin is CCOL_ERR_BUSY.
 */
CCOL_API ccol_status ccol_compile_begin(ccol_sync *sync, const char *code_id,
                                        ccol_compile **out);

/*
 * Records an observation of a tensor input: `ndim` (0..64) sizes and
 * strides (strides may be NULL for contiguous; negative values are
 * CCOL_ERR_INVALID_ARG). Strides are stored with PyTorch's InferStride
 * encoding. Last write per source wins.
 *
 * After the exchange, observing a source that some rank observed in the
 * preflight is the retrace seeing it again: ignored, CCOL_OK. A source no
 * rank observed in the preflight is CCOL_ERR_INVALID_ARG (the other ranks
 * never heard of it; observe every input during the preflight).
 */
CCOL_API ccol_status ccol_compile_observe_tensor(ccol_compile *c,
                                                 const char *source, int ndim,
                                                 const int64_t *sizes,
                                                 const int64_t *strides);
/* Records an observation of an int or float input (same rules). */
CCOL_API ccol_status ccol_compile_observe_int(ccol_compile *c,
                                              const char *source, int64_t v);
CCOL_API ccol_status ccol_compile_observe_float(ccol_compile *c,
                                                const char *source, double v);

/*
 * User marks. mark_dynamic(source, dim) needs a tensor observation of the
 * source with more than `dim` dims in this compile (else
 * CCOL_ERR_INVALID_ARG); it enters the exchange, so the dim becomes
 * dynamic on every rank, and survives a re-observation of the source.
 * mark_static(source, dim) may be called at any time; it stays on this rank
 * and wins over automatic dynamic for that size dim.
 */
CCOL_API ccol_status ccol_compile_mark_dynamic(ccol_compile *c,
                                               const char *source, int dim);
CCOL_API ccol_status ccol_compile_mark_static(ccol_compile *c,
                                              const char *source, int dim);

/*
 * Runs the compile collective, exactly once per compile: a second call is
 * CCOL_ERR_INVALID_ARG. The communicator's label is "exchange for compile
 * k of <code id>" during the exchange, so other ranks' messages say what
 * this rank was doing. On failure (DIVERGED, TIMEOUT, PEER, ...) the
 * frame state is unchanged, decisions fail, and the compile can only be
 * finished with ok = false.
 */
CCOL_API ccol_status ccol_compile_exchange(ccol_compile *c);

typedef enum ccol_decision {
    CCOL_STATIC = 0,        /* specialize to the value, guard equality */
    CCOL_DYNAMIC = 1,       /* make a symbol, guard >= 2 */
    CCOL_SPECIALIZED_01 = 2 /* dynamic, but the value is 0 or 1 here */
} ccol_decision;

/*
 * Decisions for a size dim of a tensor source (with its value on this
 * rank), a stride dim, or a number source. After the exchange they read
 * the frame state, identical on every rank: size dim d is dynamic iff the
 * merged size is dynamic or its element d is; a stride dim only if the
 * merged size is a tuple of plain ints (PyTorch); a scalar iff the merged
 * scalar is dynamic. Local rules come last: mark_static gives STATIC, and a
 * dynamic size whose value is 0 or 1 is SPECIALIZED_01 (as PyTorch's
 * ShapeEnv does; logged at INFO). Numbers are never specialized: Dynamo
 * makes a dynamic int an unspecified symbol that takes 0 and 1 too. Before the exchange (the
 * preflight) every decision is STATIC except this rank's mark_dynamic
 * dims. Sources no rank observed are STATIC.
 */
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
/* A float source: DYNAMIC iff the merged scalar is dynamic, else STATIC
 * (no value needed: numbers are never 0/1-specialized). */
CCOL_API ccol_status ccol_compile_decide_float(ccol_compile *c,
                                               const char *source,
                                               ccol_decision *out);

/*
 * Explains the decision for `what` ("L['x'].size(0)", "L['x'].stride(1)" or
 * "L['y']") in one line such as "L['x'].size(0) dynamic: 5 on rank 0, 6 on
 * rank 1", from the witnesses of the exchange (for each position, the
 * smallest ranks that saw each of the first two distinct values). Before
 * the exchange it explains this rank's own observation. *out is malloc'd
 * (ccol_free). A malformed `what` is CCOL_ERR_INVALID_ARG.
 */
CCOL_API ccol_status ccol_compile_explain(ccol_compile *c, const char *what,
                                          char **out);

/*
 * Ends the compile and frees `c`, whatever the result. With ok = true it
 * fails with CCOL_ERR_INTERNAL if no exchange happened ("compile of f
 * (compile 1) finished without a compile collective") or the exchange
 * failed. Pass ok = false to abandon a compile that failed for other
 * reasons (in collective modes, abandoning before the exchange leaves the
 * other ranks waiting until their deadline).
 */
CCOL_API ccol_status ccol_compile_finish(ccol_compile *c, bool ok);

/* Renders the frame state of `code_id` as PyTorch's LocalState does: one
 * "<source>: <entry render>\n" line per source, sorted by source; "" for a
 * frame never exchanged. *out is malloc'd (ccol_free). */
CCOL_API ccol_status ccol_sync_render(ccol_sync *sync, const char *code_id,
                                      char **out);

/*
 * Guard collective (lockstep mode, communicator size > 1): before running
 * a cached entry of a frame that already has compiled entries, every rank
 * says whether its guards hit for frame `code_id`; *all_hit is true only if
 * every rank hit (if not, every rank recompiles, so compile collectives
 * keep pairing up). One allreduce of 24 bytes (a second collective only
 * when frames differ, to name them). Ranks at different frames get
 * CCOL_ERR_DIVERGED on every rank naming them ("guard collective: ranks
 * are at different frames: ranks 0, 2 at f; rank 1 at g"). In other modes
 * *all_hit = hit and nothing is sent.
 */
CCOL_API ccol_status ccol_sync_guard(ccol_sync *sync, const char *code_id,
                                     bool hit, bool *all_hit);

/*
 * Profiles (PGO). A restarted job need not recompile what its last run
 * learned: which dims, strides and scalars became dynamic. A profile is the
 * sync's persistent state of every frame (code id -> source -> entry), the
 * state each compile exchange leaves on every rank: in modes compile and
 * lockstep the join of every rank's observations, so it is the same bytes
 * on every rank and carries no rank number (a profile written by a job of
 * N ranks loads in a job of M ranks). Its bytes are the lattice wire
 * format's "state" document (format byte 0xE3, docs/wire-format.md):
 * canonical, so equal states give equal bytes.
 *
 * Typical use: at start-up every rank reads the profile file (if any) and
 * calls ccol_sync_profile_agree() before its first compile; after the
 * last successful compile one rank calls ccol_sync_profile_save() and
 * writes the bytes (atomically). docs/protocol.md, "Profiles".
 */

/* Encodes the persistent state of every frame into *out (malloc'd, free
 * with ccol_free; an empty state is a valid 6-byte document) and *len.
 * Fails only with CCOL_ERR_NO_MEMORY. */
CCOL_API ccol_status ccol_sync_profile_save(ccol_sync *sync, void **out,
                                            size_t *len);

/*
 * Decodes a profile (untrusted bytes: checked as thoroughly as a peer's)
 * and joins it into the persistent state, frame by frame, so the next
 * compile of each frame starts from it: its first compile is already
 * dynamic where the profile says so (after the exchange; the preflight is
 * static as always). Joining keeps what the sync knew. Must be called
 * before the first compile, on every rank, with the same bytes (different
 * states are not fatal, the compile exchange joins them with a warning, but
 * then the first compiles differ from the profile's decisions):
 * ccol_sync_profile_agree() makes that hold by construction. Malformed
 * bytes give CCOL_ERR_PEER (CCOL_ERR_VERSION for another format version)
 * with a message naming what is wrong and the byte offset ("not a
 * profile: bad state document (212 bytes) at byte 37: keys not strictly
 * sorted"), and leave the sync unchanged, as does CCOL_ERR_NO_MEMORY. A
 * compile open on the sync is CCOL_ERR_BUSY; NULL data with len > 0 is
 * CCOL_ERR_INVALID_ARG.
 */
CCOL_API ccol_status ccol_sync_profile_load(ccol_sync *sync,
                                            const void *data, size_t len);

/*
 * Agrees on one profile and loads it on every rank: collective on the
 * sync's communicator (in every mode; without a communicator or with one
 * rank it is ccol_sync_profile_load of usable bytes). Every rank passes
 * what it read, or NULL/0 when it could not read anything.
 *
 * - Bytes a rank passes that do not decode are left out on that rank, with
 *   a WARNING naming what is wrong ("profile agreement: not a profile: bad
 *   state document ..."): the rank takes part as if it had none, so one
 *   rank's bad read neither fails the job nor keeps the others from a good
 *   profile.
 * - The source is the lowest rank with usable bytes. If other ranks' bytes
 *   differ (the SHA-256 digests of the bytes are compared), the source's
 *   win and every rank whose bytes differed logs a WARNING naming both.
 * - Every rank then loads the source's bytes (broadcast to the ranks that
 *   lack them), so every rank starts from the same state.
 * - If no rank has usable bytes, nothing is loaded and every rank gets
 *   CCOL_OK (a cold start).
 *
 * One all-gather of 41 bytes per rank, plus one broadcast of the profile
 * unless every rank already holds the source's bytes. Call it before the
 * first compile. Failures: those of the collectives (TIMEOUT, PEER,
 * DIVERGED, ... with the communicator's message, the label "profile
 * agreement"), CCOL_ERR_NO_MEMORY, CCOL_ERR_BUSY during a compile; the
 * sync is then unchanged.
 */
CCOL_API ccol_status ccol_sync_profile_agree(ccol_sync *sync,
                                             const void *data, size_t len);

/* Checks a profile as ccol_sync_profile_load would, without loading it:
 * CCOL_OK when the bytes would load, else the load's status and message
 * (on the sync, which is otherwise unchanged). For a tool that wants to
 * say which file is bad before the agreement leaves its bytes out. */
CCOL_API ccol_status ccol_sync_profile_check(ccol_sync *sync,
                                             const void *data, size_t len);

/* The number of frames the persistent state holds (what
 * ccol_sync_profile_save would write): right after loading a profile into
 * a fresh sync, the profile's frames. 0 for NULL. */
CCOL_API size_t ccol_sync_profile_frames(const ccol_sync *sync);

/* True once a profile was joined into the sync (by ccol_sync_profile_load,
 * or by ccol_sync_profile_agree when some rank had usable bytes). */
CCOL_API bool ccol_sync_profile_loaded(const ccol_sync *sync);

/* ------------------------------------------------------------------------ */
/* 3b. The lattice on its own                                                */
/* ------------------------------------------------------------------------ */

/*
 * A ccol_dyn is the automatic-dynamic lattice of section 3 without a
 * communicator: one frame state (source -> entry {scalar, size, stride},
 * PyTorch's FrameStateSizeEntry) plus witnesses saying which rank saw which
 * value. A compiler that merges observations or profiles offline (one file
 * per rank, a profile per run) feeds each rank's observations and reads the
 * same renders, decisions and explanations the compile collective would
 * produce for those ranks. `ccol dyn merge` is built on it; docs/lattice.md
 * has the semantics and worked merges.
 *
 * Ranks and runs. Each observe/mark call names the rank that made it (>= 0,
 * used by the witnesses). Consecutive calls with the same rank form a run:
 * one rank's view, in which the last observation of a source wins and
 * mark_dynamic survives a re-observation, like a compile's preflight. A run
 * is joined into the state when a call names another rank, and when one of
 * nsources, render, dynamic or explain is called. Since the join is
 * commutative, associative and order-free on witnesses too, the result
 * equals the rank-order fold whatever order the runs come in. A rank that
 * comes back after its run was joined adds a second observation for it
 * (joined, not replacing), as a second compile on that rank would.
 *
 * Names. Sources are non-empty strings of at most CCOL_DYN_MAX_NAME bytes,
 * compared with strcmp. Decisions are named "<source>.size(<d>)",
 * "<source>.stride(<d>)" and "<source>" (the scalar), as in
 * ccol_compile_explain().
 *
 * Errors leave a message on the handle (ccol_dyn_errmsg()), e.g.
 * "ccol_dyn_mark_dynamic(L['x'], 2): rank 1 observed L['x'] as a tensor of
 * 2 dims in this run". An allocation failure while joining a run leaves the
 * handle unusable: every later call returns CCOL_ERR_NO_MEMORY. Outputs
 * (char **out) are written only on success and freed with ccol_free(). A
 * handle is used by one thread at a time; different handles are independent.
 */
typedef struct ccol_dyn ccol_dyn;

/* Largest tensor rank of an observation, and longest source name (bytes,
 * without the NUL). */
#define CCOL_DYN_MAX_DIMS 64
#define CCOL_DYN_MAX_NAME 4096

/* Creates an empty lattice (no sources). CCOL_ERR_INVALID_ARG if out is
 * NULL, CCOL_ERR_NO_MEMORY (then *out is NULL). */
CCOL_API ccol_status ccol_dyn_create(ccol_dyn **out);

/* Frees the lattice. NULL is a no-op. */
CCOL_API void ccol_dyn_destroy(ccol_dyn *d);

/* The message of the last failed call ("" if none; "no handle" for NULL).
 * Owned by the handle, valid until the next call on it. */
CCOL_API const char *ccol_dyn_errmsg(const ccol_dyn *d);

/*
 * Records rank `rank`'s observation of a tensor input `source`: `ndim`
 * (0..CCOL_DYN_MAX_DIMS) sizes and strides (strides NULL: contiguous),
 * non-negative. Stored as make_tensor: {scalar: DYN, size: sizes, stride:
 * the InferStride encoding}. Last write per source wins within the run.
 * CCOL_ERR_INVALID_ARG for a negative rank, a bad source name, ndim out of
 * range, sizes NULL with ndim > 0, or a negative size or stride (the
 * message names the dim).
 */
CCOL_API ccol_status ccol_dyn_observe_tensor(ccol_dyn *d, int rank,
                                             const char *source, int ndim,
                                             const int64_t *sizes,
                                             const int64_t *strides);

/* Records an int or float input as make_scalar: {scalar: v, size: DYN,
 * stride: DYN} (same rules). 3 and 3.0 are equal (static); a NaN is
 * dynamic as soon as it meets another observation (nan != nan). */
CCOL_API ccol_status ccol_dyn_observe_int(ccol_dyn *d, int rank,
                                          const char *source, int64_t v);
CCOL_API ccol_status ccol_dyn_observe_float(ccol_dyn *d, int rank,
                                            const char *source, double v);

/*
 * mark_dynamic(dim) by `rank`: the current run must hold a tensor
 * observation of `source` with more than `dim` dims (else
 * CCOL_ERR_INVALID_ARG). When the run is joined, size[dim] becomes dynamic
 * (entry |= make_size(DYN at dim), as PyTorch's builder does) and a witness
 * records the mark. A mark survives a re-observation of the source in the
 * same run if the new observation still has the dim; otherwise it is
 * dropped. Marking twice is a no-op.
 */
CCOL_API ccol_status ccol_dyn_mark_dynamic(ccol_dyn *d, int rank,
                                           const char *source, int dim);

/*
 * Joins the open run and writes the number of distinct sources observed so
 * far. Afterwards ccol_dyn_source(d, i) for i < *out returns them in strcmp
 * order.
 */
CCOL_API ccol_status ccol_dyn_nsources(ccol_dyn *d, size_t *out);

/* The i-th source (strcmp order) as counted by the last ccol_dyn_nsources()
 * call; owned by the handle, valid until the next observe or mark call.
 * NULL if i is out of range or if observations were recorded since that
 * call (call ccol_dyn_nsources() again). */
CCOL_API const char *ccol_dyn_source(const ccol_dyn *d, size_t i);

/*
 * PyTorch's FrameStateSizeEntry.render() of the merged entry of `source`,
 * byte for byte: "tensor size=[?, 10] stride=[S(1), 1]", "scalar 3",
 * "fully dynamic scalar or tensor" or "unusual FrameStateSizeEntry(...)".
 * Numbers print as Python's str(). A source nobody observed is
 * CCOL_ERR_INVALID_ARG.
 */
CCOL_API ccol_status ccol_dyn_render(ccol_dyn *d, const char *source,
                                     char **out);

/*
 * The dynamic decisions of `source`, sorted by strcmp and separated by
 * '\n' ("" when everything is static), e.g. "L['x'].size(0)\nL['x'].stride(1)".
 * Size and stride dims are asked up to the largest tensor rank any rank
 * observed for the source (size dim d: size or size[d] dynamic; stride dim
 * d: only when size is a tuple of ints, stride or stride[d] dynamic); the
 * bare source is listed when some rank observed a number and the scalar is
 * dynamic. Decisions do not apply the local rules of a compile
 * (mark_static, 0/1 specialization). A source nobody observed is
 * CCOL_ERR_INVALID_ARG.
 */
CCOL_API ccol_status ccol_dyn_dynamic(ccol_dyn *d, const char *source,
                                      char **out);

/*
 * One line explaining the decision named `what`, from the witnesses, e.g.
 * "L['x'].size(0) dynamic: 5 on rank 0, 6 on rank 1",
 * "L['x'].size(1) static: 10" or
 * "L['m'].size(0) dynamic: marked dynamic on rank 1; 3 on rank 0".
 * A `what` equal to an observed source names its scalar decision; otherwise
 * it must be "<source>.size(<d>)" or "<source>.stride(<d>)" with d in
 * [0, CCOL_DYN_MAX_DIMS) and an observed source. Anything else, such as
 * "L['x'].size(" or "L['x'].size(64)", is CCOL_ERR_INVALID_ARG with a
 * message saying which forms are accepted.
 */
CCOL_API ccol_status ccol_dyn_explain(ccol_dyn *d, const char *what,
                                      char **out);

/* ------------------------------------------------------------------------ */
/* 4. Decision helpers                                                        */
/* ------------------------------------------------------------------------ */

/*
 * Each helper is collective on a communicator and runs exactly one
 * operation (ccol_agree_bytes: at most two); every rank computes its result from the same gathered bytes
 * with the same code, so results and error messages are bit-identical on
 * every rank. Failures of the communicator are returned with its message
 * (and poison it); DIVERGED or INVALID_ARG results computed from a
 * successful exchange are left in ccol_comm_errmsg() without poisoning the
 * communicator (the ranks are still in step).
 */

/* Benchmarks candidate `index`; writes its cost (lower is better) or returns
 * false if the candidate failed. */
typedef bool (*ccol_bench_fn)(void *ud, size_t index, double *cost);

/*
 * Sharded autotuning: candidate i (0 <= i < n) is benchmarked only by rank
 * i % size; costs are exchanged (one allreduce MIN of n doubles); the
 * winner is the lowest cost, ties to the lowest index. A failed candidate
 * (bench returned false) or a NaN cost counts +inf. All failed is
 * CCOL_ERR_INVALID_ARG on every rank ("ccol_agree_choice: all N candidates
 * failed"). `costs` (may be NULL) receives all n costs. Every rank must
 * pass the same n (else DIVERGED from the communicator).
 */
CCOL_API ccol_status ccol_agree_choice(ccol_comm *comm, size_t n,
                                       ccol_bench_fn bench, void *ud,
                                       size_t *winner, double *costs);

/*
 * Estimate alignment: replaces values[i] by the median of every rank's
 * values[i] (the mean of the two middle values for an even number of
 * ranks), bit-identical on every rank. Values are ordered by IEEE
 * totalOrder (-0.0 before +0.0, NaNs last). Ranks passing different n get
 * CCOL_ERR_DIVERGED naming them ("ranks 0, 2: 3 values; rank 1: 4 values")
 * and values are unchanged.
 */
CCOL_API ccol_status ccol_align(ccol_comm *comm, double *values, size_t n);

/*
 * Divergence check: each rank supplies a digest and a short text summary
 * (lines separated by '\n'; may be NULL). If digests differ, every rank gets
 * CCOL_ERR_DIVERGED with the ranks grouped by digest and, for each group,
 * the first summary line where the groups differ, e.g. "ccol_verify: ranks
 * disagree, 2 different digests (first differing summary line: 2): ranks 0,
 * 2: digest 00000000000000aa, line 2 "mm 64x64"; rank 1: digest
 * 00000000000000bb, line 2 "mm 64x32"".
 */
CCOL_API ccol_status ccol_verify(ccol_comm *comm, uint64_t digest,
                                 const char *summary);

/* *all = flag is true on every rank (one allreduce AND). */
CCOL_API ccol_status ccol_agree_all(ccol_comm *comm, bool flag, bool *all);

/*
 * Agreement on bytes (what a profile or a store's files read): every rank
 * passes what it has (len 0: nothing) and gets the bytes of the source,
 * the lowest rank that has some, in *out (ccol_free) and *out_len, and the
 * source's rank in *src; with no bytes anywhere *out is NULL, *out_len 0
 * and *src -1 on every rank. The ranks compare SHA-256 digests in one
 * all-gather of 41 bytes per rank; unless every rank already holds the
 * source's bytes, a broadcast of them follows (so this helper may run two
 * operations), and what arrived is checked against the source's digest
 * (CCOL_ERR_PEER otherwise). Messages lead with the communicator's label
 * (ccol_comm_set_label), the caller's name for what is agreed.
 */
CCOL_API ccol_status ccol_agree_bytes(ccol_comm *comm, const void *data,
                                      size_t len, void **out,
                                      size_t *out_len, int *src);

/* ------------------------------------------------------------------------ */
/* 4b. Shape buckets                                                          */
/* ------------------------------------------------------------------------ */

/*
 * The ranks agree on a few padded sizes of one dimension (a sequence
 * length) that fit the data every rank saw, so that a compiler makes at
 * most K graphs, the same on every rank. Each rank counts the lengths it
 * sees in a histogram of at most CCOL_BUCKETS_MAX_BINS bins (lengths up to
 * a few one bin each, then log-spaced up to max_len); at an agreement
 * point the ranks sum those counts (one allreduce of 512 bytes per rank,
 * the counts and a check of the handles) and every rank runs the same
 * exact fit: the K or fewer bin edges, the largest always max_len, that
 * minimise the padded tokens of the summed counts (a length pads to the
 * smallest bucket at or above its bin's edge). The same counts give the
 * same buckets on any number of ranks.
 *
 * The handle keeps a window of the summed counts: each agreement keeps
 * three quarters of the window before it and adds its sums. The first
 * agreement fits the window; a later one keeps the buckets unless they
 * pad the window more than (1 + margin) times its own best fit does (the
 * lengths drifted), and then fits it anew. Every rank decides from the
 * same sums, so all ranks re-agree at the same agreement or none does.
 * A handle is used by one thread at a time.
 */
#define CCOL_BUCKETS_MAX_BINS 60
#define CCOL_BUCKETS_MAX_K 32
#define CCOL_BUCKETS_MAX_LEN (1u << 24)

typedef struct ccol_buckets ccol_buckets;

/*
 * A handle for one dimension: lengths 1..max_len (max_len at most
 * CCOL_BUCKETS_MAX_LEN), at most k buckets (1..CCOL_BUCKETS_MAX_K), the
 * drift margin (a finite number >= 0; 0.1 re-agrees when the recent
 * lengths pad 10% more than their best fit). Until the first agreement
 * the only bucket is max_len. Bad arguments are CCOL_ERR_INVALID_ARG with
 * *out NULL.
 */
CCOL_API ccol_status ccol_buckets_new(uint32_t max_len, uint32_t k,
                                      double margin, ccol_buckets **out);
CCOL_API void ccol_buckets_destroy(ccol_buckets *b);
CCOL_API const char *ccol_buckets_errmsg(const ccol_buckets *b);

/*
 * A compile budget: at most `graphs` distinct sizes over the handle's life
 * (k..CCOL_BUCKETS_MAX_BINS; 0, the default, for no limit). A re-fit whose
 * new sizes would pass it picks the best k of the sizes agreed before
 * instead (graphs already compiled). Only before the first agreement;
 * every rank must set the same budget (checked as max_len and k are).
 */
CCOL_API ccol_status ccol_buckets_set_budget(ccol_buckets *b,
                                             uint32_t graphs);

/* Counts one length (1..max_len, else CCOL_ERR_INVALID_ARG naming it). */
CCOL_API ccol_status ccol_buckets_observe(ccol_buckets *b, uint32_t len);

/*
 * Collective on `comm`: sums the counts every rank observed since its
 * last agreement and decides as above; *changed (may be NULL) is whether
 * the bucket set changed. Ranks whose handles differ in max_len, k,
 * budget or margin get
 * CCOL_ERR_DIVERGED on every rank (the sums and the sums of squares of
 * a fingerprint of max_len, k, budget, margin and the bins travel with the
 * counts: all equal exactly when size * sum of squares = sum squared).
 * A failure of the communicator is returned with its message; the handle
 * keeps its buckets and its counts.
 */
CCOL_API ccol_status ccol_buckets_agree(ccol_comm *comm, ccol_buckets *b,
                                        bool *changed);

/* The agreed bucket sizes, ascending, and their number (<= k). */
CCOL_API uint32_t ccol_buckets_count(const ccol_buckets *b);
CCOL_API uint32_t ccol_buckets_size(const ccol_buckets *b, uint32_t i);
/* The smallest bucket >= len in *padded (1 <= len <= max_len, else
 * CCOL_ERR_INVALID_ARG). */
CCOL_API ccol_status ccol_buckets_pad(ccol_buckets *b, uint32_t len,
                                      uint32_t *padded);
/* A digest of the bucket set: equal on ranks that agree. */
CCOL_API uint64_t ccol_buckets_digest(const ccol_buckets *b);
/* How many agreements changed the bucket set so far. */
CCOL_API uint32_t ccol_buckets_generation(const ccol_buckets *b);
/*
 * The agreement schedule every caller can share, so that all ranks agree
 * at the same steps: whether step (0-based: the step-th batch, counted
 * before it is padded) is an agreement point. The first is step
 * warmup - 1; then the gaps double (1, 2, 4, ...) while they are below
 * `every`, then every `every` steps: early agreements, while the counts
 * are few, and rarer ones once they are many. False when warmup or every
 * is 0.
 */
CCOL_API bool ccol_buckets_due(uint64_t step, uint32_t warmup,
                               uint32_t every);

/* ------------------------------------------------------------------------ */
/* 5. Trace log                                                              */
/* ------------------------------------------------------------------------ */

/*
 * With CCOL_TRACE=DIR every ccol_sync appends JSON lines to
 * DIR/rank-<r>.jsonl (DIR is created if missing): compile begin and end,
 * observations, exchanges (bytes, duration, ranks), decision changes with
 * their witnesses, guard hits and misses, errors. A compiler adds its own
 * events (restart, recompile, graph_break, eager_fallback, ...) with
 * ccol_sync_trace(). `ccol report DIR` turns the files of all ranks into
 * one HTML or text report. The line schema (a "v" version in every line)
 * is documented in docs/trace-format.md.
 *
 * Guarantees: each event is written with one write() to a file opened with
 * O_APPEND, so a line is complete even if the process dies right after;
 * tracing off costs one branch per event; an unwritable directory logs one
 * warning (through ccol_log_set's callback) and disables tracing, and the
 * job goes on. Trace handles may be used by several threads at once.
 */
#define CCOL_TRACE_FORMAT_VERSION 1

typedef struct ccol_trace ccol_trace;

/*
 * Opens a trace writer for rank `rank` of `size` ranks (0: unknown) that
 * appends to DIR/rank-<rank>.jsonl. The file is created on the first
 * event. `dir` is copied. Fails with CCOL_ERR_INVALID_ARG on an empty dir
 * or a bad rank (then *out is NULL).
 */
CCOL_API ccol_status ccol_trace_open(const char *dir, int rank, int size,
                                     ccol_trace **out);

/* Closes the file and frees the writer. NULL is a no-op. */
CCOL_API void ccol_trace_close(ccol_trace *t);

/* False when `t` is NULL or writing failed (tracing then stays off). */
CCOL_API bool ccol_trace_enabled(const ccol_trace *t);

/* The file the writer appends to ("" for NULL). Owned by the writer. */
CCOL_API const char *ccol_trace_path(const ccol_trace *t);

/* The message of the last failed call on `t` ("" if none). */
CCOL_API const char *ccol_trace_errmsg(const ccol_trace *t);

/*
 * Appends one event. `event` is 1-64 characters of [a-z0-9_.];
 * `fields_json` is NULL, "" or a JSON object whose members are added to
 * the line (it may span lines; it is compacted). Top-level keys the
 * format reserves ("v", "rank", "size", "event", "seq", "wall_ns",
 * "mono_ns", "pid") are refused. Returns CCOL_ERR_INVALID_ARG for a bad
 * name or bad JSON (the message names the byte offset), CCOL_OK otherwise,
 * also when tracing is disabled: a trace never fails a job.
 */
CCOL_API ccol_status ccol_trace_event(ccol_trace *t, const char *event,
                                      const char *fields_json);

/*
 * Appends a compiler event to the sync's trace (the one CCOL_TRACE opened),
 * e.g. ccol_sync_trace(s, "graph_break", "{\"frame\": \"f\", \"line\": 3}").
 * Conventional names the report understands: restart, recompile,
 * graph_break, eager_fallback, guard, error (see docs/trace-format.md).
 * Same contract as ccol_trace_event(); the message goes to
 * ccol_sync_errmsg(). Without tracing this is one branch and CCOL_OK.
 */
CCOL_API ccol_status ccol_sync_trace(ccol_sync *s, const char *event,
                                     const char *fields_json);

/*
 * Same without building JSON: `fields` lists space-separated "name:type"
 * tokens, one argument each: s (const char *, escaped; NULL is null),
 * d (int), i (int64_t), u (uint64_t), f (double), b (int, as a bool).
 * Example: ccol_sync_tracef(s, "graph_break", "frame:s line:d", "f", 3).
 * Never fails; a bad name or token ends the fields there.
 */
CCOL_API void ccol_sync_tracef(ccol_sync *s, const char *event,
                               const char *fields, ...);

/* Is the sync writing a trace? Lets a compiler skip formatting events. */
CCOL_API bool ccol_sync_tracing(const ccol_sync *s);

#ifdef __cplusplus
}
#endif
#endif /* CCOL_H */
