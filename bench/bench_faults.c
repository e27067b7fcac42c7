/*
 * bench_faults.c - `ccol bench faults`: a randomized fault campaign.
 *
 * Each trial runs a real `ccol jit` job (this binary, -n N local ranks
 * over shm and tcp in turn, lockstep mode) whose ranks see different batch
 * sizes, so the job runs compile exchanges, guard collectives and in-graph
 * all_reduces. One rank gets one random fault through CCOL_FAULT (drop,
 * delay, truncate, corrupt, close, kill or stall at a random operation).
 * The trial passes when the job ends within the deadline plus a margin and
 * every surviving rank either succeeded (only possible if the fault was
 * harmless or never fired) or failed with an error that names the faulty
 * rank. A table of faults and outcomes follows; the exit status is 1 if any
 * trial failed.
 */
#include "bench.h"
#include "bench_util.h"
#include "util.h"

#include <jansson.h>
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NKINDS 7

static const char *const kinds[NKINDS] = { "drop",  "delay", "truncate",
                                           "corrupt", "close", "kill",
                                           "stall" };

static const char program[] =
    "def step(x, w, lr):\n"
    "    h = relu(x @ w)\n"
    "    g = all_reduce(h.sum(0))\n"
    "    return g * lr\n";

typedef struct faults_cfg {
    int trials;
    unsigned seed;
    double timeout;
    char dir[256];   /* scratch directory with program and schedules */
    char *exe;       /* this binary */
} faults_cfg;

/* Outcome counters per fault kind. */
typedef struct tally {
    int tried, ok_all, named, named_faulty, bad;
} tally;

typedef struct trial {
    int ranks, faulty, op;
    const char *kind;
    const char *mode;
    const char *transport; /* CCOL_TRANSPORT of the job */
} trial;

/* Writes the program and a schedule for `n` ranks: six calls, batch sizes
 * that differ per rank and change over time (recompiles, exchanges). */
static int
write_files(const faults_cfg *cfg, int n)
{
    char path[320];
    FILE *f;

    snprintf(path, sizeof path, "%s/step.tl", cfg->dir);
    if ((f = fopen(path, "w")) == NULL)
        return -1;
    fputs(program, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/sched-%d.json", cfg->dir, n);
    if ((f = fopen(path, "w")) == NULL)
        return -1;
    fprintf(f, "{\"calls\": [");
    for (int k = 0; k < 6; k++) {
        fprintf(f, "%s{\"fn\": \"step\", \"per_rank\": [", k ? ", " : "");
        for (int r = 0; r < n; r++)
            fprintf(f, "%s[{\"tensor\": [%d, 8]}, {\"tensor\": [8, 4]}, "
                    "0.5]", r ? ", " : "", 4 + (k >= r ? k + r : 0));
        fprintf(f, "]}");
    }
    fprintf(f, "]}\n");
    fclose(f);
    return 0;
}

/* True if `msg` names some rank ("rank 3", "ranks 1, 2", "missing rank"). */
static bool
names_a_rank(const char *msg, int *which)
{
    regex_t re;
    regmatch_t m[2];
    bool found = false;

    if (regcomp(&re, "rank[s]?:? ([0-9]+)", REG_EXTENDED) != 0)
        return false;
    if (regexec(&re, msg, 2, m, 0) == 0) {
        found = true;
        *which = atoi(msg + m[1].rm_so);
    }
    regfree(&re);
    return found;
}

/* True if `msg` names rank r: "rank 3", "missing rank: 3", "ranks 1, 3". */
static bool
mentions_rank(const char *msg, int r)
{
    for (const char *p = strstr(msg, "rank"); p; p = strstr(p + 1, "rank")) {
        const char *q = p + 4;
        q += *q == 's';
        q += *q == ':';
        while (*q == ' ' || (*q >= '0' && *q <= '9') || *q == ',') {
            char *end;
            long v = strtol(q, &end, 10);
            if (end != q && v == r)
                return true;
            q = end != q ? end : q + 1;
        }
    }
    return false;
}

/* Judges one job summary. Returns 0 pass, 1 fail (reason in why). */
static int
judge(const trial *t, json_t *sum, tally *ty, char *why, size_t n)
{
    json_t *ranks = json_object_get(sum, "ranks"), *r;
    size_t i;
    int failed = 0, named = 0, named_faulty = 0;

    if (!json_is_array(ranks) || json_array_size(ranks) != (size_t)t->ranks)
        return snprintf(why, n, "summary has no entry per rank"), 1;
    json_array_foreach(ranks, i, r)
    {
        json_t *err = json_object_get(r, "error");
        const char *msg = json_string_value(json_object_get(err, "message"));
        int who = -1;
        if ((int)i == t->faulty || json_is_null(err))
            continue;
        failed++;
        if (msg == NULL || !names_a_rank(msg, &who))
            return snprintf(why, n, "rank %zu failed without naming a rank: "
                            "%.200s", i, msg ? msg : "(no message)"), 1;
        named++;
        if (!mentions_rank(msg, t->faulty))
            return snprintf(why, n, "rank %zu's error does not name the "
                            "faulty rank %d: %.200s", i, t->faulty, msg), 1;
        named_faulty++;
    }
    if (failed == 0)
        ty->ok_all++;
    ty->named += named > 0;
    ty->named_faulty += named > 0 && named_faulty > 0;
    return 0;
}

static json_t *
find_summary(const char *out)
{
    const char *p = strstr(out, "{\"ok\"");
    json_error_t je;
    if (p == NULL)
        return NULL;
    return json_loadb(p, strcspn(p, "\n"), 0, &je);
}

/* The argument words of one `ccol jit` run, owned by the trial. */
typedef struct jit_argv {
    char prog[320], sched[320], n[16], timeout[16], mode[16];
    char w_jit[4], w_sched[12], w_n[3], w_json[7], w_timeout[10], w_coll[14];
    char *v[13];
} jit_argv;

static void
make_argv(const faults_cfg *cfg, const trial *t, jit_argv *a)
{
    snprintf(a->prog, sizeof a->prog, "%s/step.tl", cfg->dir);
    snprintf(a->sched, sizeof a->sched, "%s/sched-%d.json", cfg->dir,
             t->ranks);
    snprintf(a->n, sizeof a->n, "%d", t->ranks);
    snprintf(a->timeout, sizeof a->timeout, "%g", cfg->timeout);
    snprintf(a->mode, sizeof a->mode, "%s", t->mode);
    strcpy(a->w_jit, "jit");
    strcpy(a->w_sched, "--schedule");
    strcpy(a->w_n, "-n");
    strcpy(a->w_json, "--json");
    strcpy(a->w_timeout, "--timeout");
    strcpy(a->w_coll, "--collectives");
    char *v[13] = { cfg->exe,     a->w_jit,     a->prog,   a->w_sched,
                    a->sched,     a->w_n,       a->n,      a->w_json,
                    a->w_timeout, a->timeout,   a->w_coll, a->mode,
                    NULL };
    memcpy(a->v, v, sizeof v);
}

/* Runs one trial; returns 0 pass, 1 fail. */
static int
run_trial(const faults_cfg *cfg, const trial *t, tally *ty, char *why,
          size_t n)
{
    char spec[128], *out = NULL;
    jit_argv a;
    double t0 = ccol_bench_now(), limit = 4 * cfg->timeout + 15;
    json_t *sum;
    int rc, verdict;

    snprintf(spec, sizeof spec, "rank=%d,op=%d,kind=%s%s", t->faulty, t->op,
             t->kind, strcmp(t->kind, "stall") == 0 ? ",ms=2500" : "");
    make_argv(cfg, t, &a);
    setenv("CCOL_FAULT", spec, 1);
    setenv("CCOL_TRANSPORT", t->transport, 1);
    rc = ccol_bench_capture(a.v, limit, &out);
    unsetenv("CCOL_FAULT");
    unsetenv("CCOL_TRANSPORT");
    ty->tried++;
    if (rc == -1 || rc == -2) {
        snprintf(why, n, "%s (%s)", rc == -1 ? "hang: killed" : "not started",
                 spec);
        free(out);
        return 1;
    }
    sum = out ? find_summary(out) : NULL;
    verdict = sum ? judge(t, sum, ty, why, n)
                  : (snprintf(why, n, "no JSON summary (exit %d)", rc), 1);
    if (verdict == 0 && ccol_bench_now() - t0 > 3 * cfg->timeout + 10)
        verdict = (snprintf(why, n, "took %.1f s", ccol_bench_now() - t0), 1);
    json_decref(sum);
    free(out);
    return verdict;
}

static void
print_table(const tally *ty, int fails, int trials)
{
    printf("\n%-9s %6s %9s %12s %18s %6s\n", "fault", "tried", "all ok",
           "named error", "named faulty rank", "FAIL");
    for (int k = 0; k < NKINDS; k++)
        printf("%-9s %6d %9d %12d %18d %6d\n", kinds[k], ty[k].tried,
               ty[k].ok_all, ty[k].named, ty[k].named_faulty, ty[k].bad);
    printf("\n%d trials, %d failed\n", trials, fails);
}

static int
parse_args(int argc, char **argv, faults_cfg *cfg)
{
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            return -1;
        if (strcmp(argv[i], "--trials") == 0)
            cfg->trials = atoi(argv[++i]);
        else if (strcmp(argv[i], "--seed") == 0)
            cfg->seed = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--timeout") == 0) {
            if (tool_parse_seconds(argv[++i], 86400, &cfg->timeout) != 0)
                return -1;
        } else
            return -1;
    }
    return cfg->trials > 0 && cfg->timeout > 0 ? 0 : -1;
}

static void
cleanup(const faults_cfg *cfg)
{
    char path[320];
    snprintf(path, sizeof path, "%s/step.tl", cfg->dir);
    unlink(path);
    for (int n = 2; n <= 8; n++) {
        snprintf(path, sizeof path, "%s/sched-%d.json", cfg->dir, n);
        unlink(path);
    }
    rmdir(cfg->dir);
}

static int
setup(faults_cfg *cfg)
{
    char *dir = ccol_bench_exe_dir();
    if (dir == NULL)
        return -1;
    cfg->exe = malloc(strlen(dir) + 8);
    sprintf(cfg->exe, "%s/ccol", dir);
    free(dir);
    snprintf(cfg->dir, sizeof cfg->dir, "/tmp/ccol-faults-XXXXXX");
    if (mkdtemp(cfg->dir) == NULL)
        return -1;
    for (int n = 2; n <= 8; n++)
        if (write_files(cfg, n) != 0)
            return -1;
    return 0;
}

int
ccol_bench_faults(int argc, char **argv)
{
    faults_cfg cfg = { .trials = 200, .seed = 1, .timeout = 1.0 };
    tally ty[NKINDS] = { { 0 } };
    int fails = 0;

    if (parse_args(argc, argv, &cfg) != 0) {
        fprintf(stderr, "usage: ccol bench faults [--trials N] [--seed S] "
                "[--timeout SECONDS]\n");
        return 2;
    }
    if (setup(&cfg) != 0) {
        fprintf(stderr, "faults: cannot prepare a scratch directory\n");
        return 1;
    }
    srand(cfg.seed);
    printf("fault campaign: %d trials (shm and tcp in turn), seed %u, "
           "deadline %g s\n", cfg.trials, cfg.seed, cfg.timeout);
    for (int i = 0; i < cfg.trials; i++) {
        int k = rand() % NKINDS;
        trial t = { .ranks = 2 + rand() % 7, .op = 1 + rand() % 15,
                    .kind = kinds[k], .mode = "lockstep",
                    .transport = i % 2 ? "tcp" : "shm" };
        char why[512];
        t.faulty = rand() % t.ranks;
        if (run_trial(&cfg, &t, &ty[k], why, sizeof why) != 0) {
            fails++;
            ty[k].bad++;
            printf("FAIL trial %d: %d ranks, %s, %s, rank %d op %d %s: %s\n",
                   i, t.ranks, t.transport, t.mode, t.faulty, t.op, t.kind,
                   why);
        }
    }
    print_table(ty, fails, cfg.trials);
    cleanup(&cfg);
    free(cfg.exe);
    return fails ? 1 : 0;
}
