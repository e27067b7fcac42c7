#!/usr/bin/env bash
# test_run.sh - tests of the `ccol run` launcher: per-rank environment,
# output prefixing, exit status propagation, stopping ranks on failure and
# on SIGINT, ranks and what they started dying with a SIGKILLed launcher
# (or a killed rank), usage errors and free-port selection.
# Usage: bash test_run.sh <path-of-ccol> <source-dir>
set -u

CCOL=${1:?usage: test_run.sh <path-of-ccol> <source-dir>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ccol-test-run.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
PASS=0
FAIL=0

ok() { PASS=$((PASS + 1)); echo "ok   $1"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL $1: $2"; }

# run NAME ARGS...: runs `ccol run ARGS` under timeout; sets RC, OUT, ERR.
run() {
    timeout -k 5 30 "$CCOL" run "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
    RC=$?
    OUT=$(cat "$TMP/out")
    ERR=$(cat "$TMP/err")
}

now_ms() { date +%s%3N; }

test_env() {
    local want line r
    OMPI_COMM_WORLD_RANK=7 OMPI_COMM_WORLD_SIZE=9 PMI_RANK=4 PMI_SIZE=9 \
        SLURM_PROCID=3 SLURM_NTASKS=9 RANK=42 WORLD_SIZE=99 \
        run -n 3 --master-port 29511 -- sh -c 'echo "$RANK $WORLD_SIZE \
$LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT $GROUP_RANK \
$CCOL_RUN ${OMPI_COMM_WORLD_RANK-x}${OMPI_COMM_WORLD_SIZE-x}\
${PMI_RANK-x}${PMI_SIZE-x}${SLURM_PROCID-x}${SLURM_NTASKS-x}"'
    [ "$RC" = 0 ] || { bad env "exit $RC: $ERR"; return; }
    for r in 0 1 2; do
        want="[rank $r] $r 3 $r 3 127.0.0.1 29511 0 1 xxxxxx"
        line=$(grep -F "[rank $r] " <<<"$OUT")
        [ "$line" = "$want" ] || { bad env "got '$line' want '$want'"; return; }
    done
    [ "$(wc -l <<<"$OUT")" = 3 ] || { bad env "not 3 lines: $OUT"; return; }
    ok env
}

test_master_addr() {
    run -n 2 --master-addr=127.0.0.2 -- sh -c 'echo "$MASTER_ADDR"'
    [ "$RC" = 0 ] && [ "$(grep -c '127.0.0.2$' <<<"$OUT")" = 2 ] ||
        { bad master_addr "rc=$RC out=$OUT err=$ERR"; return; }
    ok master_addr
}

test_nproc_aliases() {
    run --nproc-per-node=2 -- sh -c 'echo "$WORLD_SIZE"'
    [ "$RC" = 0 ] && [ "$(grep -c ' 2$' <<<"$OUT")" = 2 ] ||
        { bad nproc_aliases "--nproc-per-node: $RC $OUT"; return; }
    run --nproc 3 -- sh -c 'echo "$WORLD_SIZE"'
    [ "$RC" = 0 ] && [ "$(grep -c ' 3$' <<<"$OUT")" = 3 ] ||
        { bad nproc_aliases "--nproc: $RC $OUT"; return; }
    ok nproc_aliases
}

test_prefix() {
    run -n 2 -- sh -c 'echo "a$RANK"; echo "e$RANK" >&2; echo "b$RANK";
printf "tail$RANK"; printf "etail$RANK" >&2'
    [ "$RC" = 0 ] || { bad prefix "exit $RC"; return; }
    for r in 0 1; do
        [ "$(grep -cxF -e "[rank $r] a$r" -e "[rank $r] b$r" \
            -e "[rank $r] tail$r" <<<"$OUT")" = 3 ] ||
            { bad prefix "stdout of rank $r: $OUT"; return; }
        [ "$(grep -cxF -e "[rank $r] e$r" -e "[rank $r] etail$r" \
            <<<"$ERR")" = 2 ] ||
            { bad prefix "stderr of rank $r: $ERR"; return; }
    done
    # Order within one rank's stream is kept.
    [ "$(grep -F '[rank 0]' <<<"$OUT" | tr '\n' ' ')" = \
      "[rank 0] a0 [rank 0] b0 [rank 0] tail0 " ] ||
        { bad prefix "order: $OUT"; return; }
    grep -qv '^\[rank [01]\] ' <<<"$OUT" &&
        { bad prefix "stray: $OUT"; return; }
    ok prefix
}

test_long_line() {
    local n
    run -n 1 -- sh -c 'head -c 200000 /dev/zero | tr "\0" a; echo; echo end'
    n=$(sed 's/^\[rank 0\] //' <<<"$OUT" | grep -o a | wc -l)
    [ "$RC" = 0 ] && [ "$n" = 200000 ] && [ "$(tail -n1 <<<"$OUT")" = \
        "[rank 0] end" ] && ! grep -qv '^\[rank 0\] ' <<<"$OUT" ||
        { bad long_line "rc=$RC a=$n"; return; }
    ok long_line
}

test_exit_status() {
    run -n 3 -- sh -c 'exit 0'
    [ "$RC" = 0 ] || { bad exit_status "all zero gave $RC"; return; }
    run -n 3 -- sh -c '[ "$RANK" = 2 ] && exit 3; exit 0'
    [ "$RC" = 3 ] || { bad exit_status "rank 2 exit 3 gave $RC"; return; }
    grep -q 'rank 2 exited with status 3' <<<"$ERR" ||
        { bad exit_status "no message: $ERR"; return; }
    ok exit_status
}

test_fail_stops_sleeper() {
    local t0 t1
    t0=$(now_ms)
    run -n 3 -- sh -c 'echo $$ > '"$TMP"'/pid.$RANK;
[ "$RANK" = 1 ] && { sleep 0.3; exit 5; }; sleep 60'
    t1=$(now_ms)
    [ "$RC" = 5 ] || { bad fail_stops_sleeper "exit $RC: $ERR"; return; }
    [ $((t1 - t0)) -lt 2500 ] ||
        { bad fail_stops_sleeper "took $((t1 - t0)) ms"; return; }
    for r in 0 2; do
        kill -0 "$(cat "$TMP/pid.$r")" 2>/dev/null &&
            { bad fail_stops_sleeper "rank $r still alive"; return; }
    done
    ok fail_stops_sleeper
}

test_sigkill_escalation() {
    local t0 t1
    t0=$(now_ms)
    # Rank 1 ignores SIGTERM (and says so); rank 0 then fails.
    run -n 2 -- sh -c 'm='"$TMP"'/trapped; if [ "$RANK" = 0 ]; then
for i in $(seq 100); do [ -e $m ] && exit 6; sleep 0.05; done; exit 7; fi
trap "" TERM; touch $m; while :; do sleep 0.1; done'
    t1=$(now_ms)
    [ "$RC" = 6 ] && [ $((t1 - t0)) -ge 2500 ] && [ $((t1 - t0)) -lt 15000 ] ||
        { bad sigkill_escalation "rc=$RC after $((t1 - t0)) ms"; return; }
    grep -q 'SIGKILL' <<<"$ERR" ||
        { bad sigkill_escalation "no message: $ERR"; return; }
    ok sigkill_escalation
}

test_signal_death() {
    run -n 2 -- sh -c '[ "$RANK" = 1 ] && kill -KILL $$; sleep 60'
    [ "$RC" = 137 ] || { bad signal_death "exit $RC"; return; }
    grep -q 'rank 1 was killed by signal 9' <<<"$ERR" ||
        { bad signal_death "message: $ERR"; return; }
    run -n 1 -- sh -c 'kill -SEGV $$'
    [ "$RC" = 139 ] || { bad signal_death "SEGV gave $RC"; return; }
    ok signal_death
}

test_sigint() {
    local pid i rc r
    "$CCOL" run -n 3 -- sh -c 'echo $$ > '"$TMP"'/ipid.$RANK; exec sleep 60' \
        >"$TMP/iout" 2>"$TMP/ierr" </dev/null &
    pid=$!
    for i in $(seq 100); do
        [ -s "$TMP/ipid.0" ] && [ -s "$TMP/ipid.1" ] && [ -s "$TMP/ipid.2" ] &&
            break
        sleep 0.1
    done
    kill -INT "$pid"
    for i in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid"
        bad sigint "launcher still running 10 s after SIGINT"
        return
    fi
    wait "$pid"
    rc=$?
    [ "$rc" = 130 ] || { bad sigint "exit $rc"; return; }
    for r in 0 1 2; do
        kill -0 "$(cat "$TMP/ipid.$r")" 2>/dev/null &&
            { bad sigint "rank $r still alive"; return; }
    done
    ok sigint
}

# usage NAME ARGS...: `ccol run ARGS` must exit 2 with a message.
usage() {
    local name=$1
    shift
    run "$@"
    [ "$RC" = 2 ] && [ -n "$ERR" ] ||
        { bad "usage_$name" "exit $RC, stderr '$ERR'"; return 1; }
    return 0
}

test_usage() {
    usage no_n -- true || return
    usage n_zero -n 0 -- true || return
    usage n_word -n abc -- true || return
    usage n_big -n 100000 -- true || return
    usage n_missing -n || return
    usage no_dashdash -n 2 true || return
    usage no_cmd -n 2 -- || return
    usage port_big -n 2 --master-port 70000 -- true || return
    usage port_word -n 2 --master-port http -- true || return
    usage port_neg -n 2 --master-port=-1 -- true || return
    usage addr_empty -n 2 --master-addr= -- true || return
    usage unknown -n 2 --frobnicate -- true || return
    grep -q "frobnicate" <<<"$ERR" || { bad usage "no name: $ERR"; return; }
    run --help
    [ "$RC" = 0 ] && grep -q 'usage: ccol run' <<<"$OUT" ||
        { bad usage "--help gave $RC"; return; }
    ok usage
}

test_exec_failure() {
    run -n 2 -- "$TMP/no-such-program"
    [ "$RC" = 127 ] || { bad exec_failure "exit $RC"; return; }
    grep -q "cannot execute" <<<"$ERR" ||
        { bad exec_failure "message: $ERR"; return; }
    ok exec_failure
}

test_free_port() {
    local ports p
    run -n 3 -- sh -c 'echo "$MASTER_PORT"'
    [ "$RC" = 0 ] || { bad free_port "exit $RC"; return; }
    ports=$(sed 's/^\[rank [0-9]*\] //' <<<"$OUT" | sort -u)
    [ "$(wc -l <<<"$ports")" = 1 ] ||
        { bad free_port "differ: $ports"; return; }
    p=$ports
    [[ "$p" =~ ^[0-9]+$ ]] && [ "$p" -gt 0 ] && [ "$p" -lt 65536 ] ||
        { bad free_port "bad port '$p'"; return; }
    run -n 1 --master-port 0 -- sh -c 'echo "$MASTER_PORT"'
    [ "$RC" = 0 ] && [ "$OUT" != "[rank 0] 0" ] ||
        { bad free_port "--master-port 0 gave $OUT"; return; }
    ok free_port
}

test_stdin() {
    timeout 30 "$CCOL" run -n 2 -- sh -c 'cat; echo "done$RANK"' \
        <<<"hello" >"$TMP/out" 2>&1
    [ "$(grep -c hello "$TMP/out")" = 1 ] &&
        grep -qxF '[rank 0] hello' "$TMP/out" ||
        { bad stdin "$(cat "$TMP/out")"; return; }
    ok stdin
}

# A real job: ranks create their communicator from the launcher's
# environment and all-reduce their rank + 1. Needs a C compiler and the
# static library next to the ccol binary; skipped (and said so) otherwise.
test_comm_job() {
    local src=$1 lib cc
    lib=$(dirname "$CCOL")/libccol.a
    cc=$(command -v cc || command -v gcc)
    if [ -z "$cc" ] || [ ! -f "$lib" ] || [ ! -f "$src/include/ccol.h" ]; then
        echo "skip comm_job: no C compiler or no $lib"
        ok comm_job
        return
    fi
    cat >"$TMP/job.c" <<'CEOF'
#include "ccol.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv)
{
    ccol_comm *c = NULL;
    int64_t v;
    if (argc > 1 && strcmp(getenv("RANK"), argv[1]) == 0)
        return 3; /* this rank dies before joining */
    if (ccol_comm_create_env(NULL, &c) != CCOL_OK) {
        printf("create: %s\n", c ? ccol_comm_errmsg(c) : "no memory");
        return 1;
    }
    v = ccol_comm_rank(c) + 1;
    if (ccol_allreduce_i64(c, &v, 1, CCOL_OP_SUM) != CCOL_OK)
        return 1;
    printf("rank %d of %d: sum %lld\n", ccol_comm_rank(c),
           ccol_comm_size(c), (long long)v);
    ccol_comm_destroy(c);
    return 0;
}
CEOF
    # A sanitizer build of libccol.a needs the sanitizer runtimes to link.
    "$cc" -I"$src/include" "$TMP/job.c" "$lib" -lpthread -lm -o "$TMP/job" \
        2>"$TMP/ccerr" ||
        "$cc" -fsanitize=address,undefined -I"$src/include" "$TMP/job.c" \
            "$lib" -lpthread -lm -o "$TMP/job" 2>"$TMP/ccerr" ||
        { bad comm_job "compile: $(cat "$TMP/ccerr")"; return; }
    OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 run -n 4 -- "$TMP/job"
    [ "$RC" = 0 ] || { bad comm_job "exit $RC: $OUT $ERR"; return; }
    [ "$(grep -c 'of 4: sum 10$' <<<"$OUT")" = 4 ] ||
        { bad comm_job "output: $OUT"; return; }
    local t0 t1 port
    port=$(free_port)
    t0=$(now_ms)
    run -n 4 --master-port "$port" -- "$TMP/job" 2
    t1=$(now_ms)
    # The launcher stopped rank 0 while it waited for the dead rank, before
    # it could drop the job's shm name: nothing of the test may stay.
    rm -f /dev/shm/ccol-*-port-"$port"
    [ "$RC" = 3 ] && [ $((t1 - t0)) -lt 10000 ] ||
        { bad comm_job "dead rank: exit $RC after $((t1 - t0)) ms"; return; }
    ok comm_job
}

# torchrun's spellings: underscores as well as dashes, --opt=value.
test_torchrun_spellings() {
    run --nproc_per_node=2 --master_addr 127.0.0.1 --master_port=0 -- \
        sh -c 'echo "$WORLD_SIZE $MASTER_ADDR"'
    [ "$RC" = 0 ] && [ "$(grep -c ' 2 127.0.0.1$' <<<"$OUT")" = 2 ] ||
        { bad torchrun_spellings "rc=$RC out=$OUT err=$ERR"; return; }
    ok torchrun_spellings
}

# free_port: a port nothing listens on now.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Two "nodes" on this machine: each launcher starts its share of the
# ranks with global RANK, WORLD_SIZE, LOCAL_RANK and GROUP_RANK, and the
# ranks of both meet at node 0's rendezvous.
test_nodes() {
    local src=$1 port out1
    port=$(free_port)
    timeout 60 "$CCOL" run -n 2 --nnodes 2 --node_rank 1 \
        --master-port "$port" -- sh -c 'echo "$RANK $WORLD_SIZE $LOCAL_RANK $GROUP_RANK $LOCAL_WORLD_SIZE"' \
        >"$TMP/node1" 2>&1 </dev/null
    out1=$(sort "$TMP/node1")
    [ "$out1" = "$(printf '[rank 2] 2 4 0 1 2\n[rank 3] 3 4 1 1 2')" ] ||
        { bad nodes "env of node 1: $out1"; return; }
    port=$(free_port)
    timeout 60 "$CCOL" run -n 1 --nnodes 2 --node-rank 1 \
        --rdzv-endpoint "127.0.0.1:$port" -- "$CCOL" jit \
        "$src/tests/jit/golden/step.tl" --schedule \
        "$src/tests/jit/golden/same.2.json" --json --timeout 20 \
        >"$TMP/node1" 2>&1 </dev/null &
    local pid=$!
    run -n 1 --nnodes=2 --node_rank=0 --rdzv_endpoint="127.0.0.1:$port" \
        -- "$CCOL" jit "$src/tests/jit/golden/step.tl" --schedule \
        "$src/tests/jit/golden/same.2.json" --json --timeout 20
    wait "$pid"
    local rc1=$?
    [ "$RC" = 0 ] && [ "$rc1" = 0 ] &&
        grep -q '^\[rank 0\] {"ok": true, "world_size": 2' <<<"$OUT" ||
        { bad nodes "rc=$RC/$rc1 out=$OUT err=$ERR node1=$(cat "$TMP/node1")"; return; }
    ok nodes
}

# --local-ranks-filter: only the chosen ranks reach the terminal; one
# rank alone is unprefixed, so its --json output pipes into a parser.
test_ranks_filter() {
    local src=$1
    run -n 3 --local-ranks-filter 0,2 -- sh -c 'echo "o$RANK"; echo "e$RANK" >&2'
    [ "$RC" = 0 ] &&
        [ "$(sort <<<"$OUT")" = "$(printf '[rank 0] o0\n[rank 2] o2')" ] ||
        { bad ranks_filter "two ranks: $OUT"; return; }
    grep -q "e1" <<<"$ERR" && { bad ranks_filter "rank 1 shown: $ERR"; return; }
    run -n 2 --local_ranks_filter=0 -- "$CCOL" jit \
        "$src/tests/jit/golden/step.tl" --schedule \
        "$src/tests/jit/golden/same.2.json" --json --timeout 20
    [ "$RC" = 0 ] && python3 -c 'import json, sys; j = json.loads(sys.argv[1]); assert j["ok"] and j["world_size"] == 2' "$OUT" ||
        { bad ranks_filter "json: rc=$RC out=$OUT err=$ERR"; return; }
    ok ranks_filter
}

# --log-dir: one file per rank with its lines as written, none on the
# terminal; the launcher's own messages stay on stderr.
test_log_dir() {
    run -n 2 --log-dir "$TMP/logs" -- sh -c 'echo "o$RANK"; echo "e$RANK" >&2'
    [ "$RC" = 0 ] && [ -z "$OUT" ] && [ -z "$ERR" ] ||
        { bad log_dir "rc=$RC out=$OUT err=$ERR"; return; }
    for r in 0 1; do
        [ "$(sort "$TMP/logs/rank-$r.log" | tr '\n' ' ')" = "e$r o$r " ] ||
            { bad log_dir "rank-$r.log: $(cat "$TMP/logs/rank-$r.log")"; return; }
    done
    # A failing rank: its output in its file, the launcher's word on stderr.
    run -n 2 --log-dir "$TMP/logs" -- sh -c '[ "$RANK" = 1 ] || exec sleep 30; echo "bye$RANK"; exit 1'
    [ "$RC" = 1 ] && [ -z "$OUT" ] && ! grep -q '\[rank' <<<"$ERR" &&
        grep -q "ccol run: rank 1 exited with status 1" <<<"$ERR" &&
        [ "$(cat "$TMP/logs/rank-1.log")" = "bye1" ] ||
        { bad log_dir "failing: rc=$RC out=$OUT err=$ERR"; return; }
    run -n 1 --log-dir /proc/ccol-nope -- true
    [ "$RC" = 1 ] && grep -q "cannot create the directory" <<<"$ERR" ||
        { bad log_dir "bad dir: rc=$RC err=$ERR"; return; }
    ok log_dir
}

test_usage_nodes() {
    usage nnodes_no_port -n 2 --nnodes 2 -- true || return
    grep -q "every node needs the same rendezvous" <<<"$ERR" ||
        { bad usage_nodes "$ERR"; return; }
    usage node_rank_big -n 2 --nnodes 2 --node-rank 2 --master-port 5 -- true || return
    usage nnodes_elastic -n 2 --nnodes 1:4 -- true || return
    grep -q "elastic ranges are not supported" <<<"$ERR" ||
        { bad usage_nodes "$ERR"; return; }
    usage endpoint_no_port -n 2 --rdzv-endpoint localhost -- true || return
    usage filter_range -n 2 --local-ranks-filter 2 -- true || return
    usage filter_word -n 2 --local-ranks-filter a -- true || return
    usage log_dir_empty -n 2 --log-dir= -- true || return
    ok usage_nodes
}

# Local ranks get CCOL_TRANSPORT=shm unless the caller chose a transport.
test_transport_default() {
    run -n 2 -- sh -c 'echo "$CCOL_TRANSPORT"'
    [ "$RC" = 0 ] && [ "$(grep -c ' shm$' <<<"$OUT")" = 2 ] ||
        { bad transport_default "rc=$RC out=$OUT err=$ERR"; return; }
    CCOL_TRANSPORT=tcp run -n 2 -- sh -c 'echo "$CCOL_TRANSPORT"'
    [ "$RC" = 0 ] && [ "$(grep -c ' tcp$' <<<"$OUT")" = 2 ] ||
        { bad transport_default "kept: rc=$RC out=$OUT err=$ERR"; return; }
    # Several nodes: ranks are on other hosts too, no shared-memory default.
    run -n 1 --nnodes 2 --node-rank 1 --master-port "$(free_port)" -- \
        sh -c 'echo "[$CCOL_TRANSPORT]"'
    [ "$RC" = 0 ] && grep -q ' \[\]$' <<<"$OUT" ||
        { bad transport_default "nodes: rc=$RC out=$OUT err=$ERR"; return; }
    ok transport_default
}

# The pids of the `sleep MARK` processes (a marker no other test uses).
marked() { pgrep -x -f "sleep $1" | tr '\n' ' '; }

# A SIGKILLed launcher takes its ranks with it (PR_SET_PDEATHSIG): they
# are gone within a few seconds instead of sleeping on for 30.
test_launcher_killed() {
    local mark="30.$$$RANDOM" tpid cpid left i
    timeout -k 5 40 "$CCOL" run -n 2 -- sleep "$mark" \
        >"$TMP/out" 2>"$TMP/err" </dev/null &
    tpid=$!
    for i in $(seq 100); do
        left=$(marked "$mark")
        [ "$(wc -w <<<"$left")" = 2 ] && break
        sleep 0.05
    done
    cpid=$(pgrep -P "$tpid" -x ccol)
    if [ "$(wc -w <<<"$left")" != 2 ] || [ -z "$cpid" ]; then
        bad launcher_killed "ranks not started: '$left' launcher '$cpid'"
        kill -KILL $tpid $left 2>/dev/null
        { wait "$tpid"; } 2>/dev/null
        return
    fi
    kill -KILL "$cpid"
    for i in $(seq 100); do
        left=$(marked "$mark")
        [ -z "$left" ] && break
        sleep 0.05
    done
    { wait "$tpid"; } 2>/dev/null # quiet: bash would report "Killed"
    if [ -n "$left" ]; then
        kill -KILL $left 2>/dev/null
        bad launcher_killed "ranks outlived the launcher by 5 s: $left"
        return
    fi
    ok launcher_killed
}

# wait_marked MARK N: waits up to 5 s for N `sleep MARK` processes; sets
# LEFT to their pids. gone MARK: waits up to 5 s for none to be left.
wait_marked() {
    local i
    for i in $(seq 100); do
        LEFT=$(marked "$1")
        [ "$(wc -w <<<"$LEFT")" = "$2" ] && return 0
        sleep 0.05
    done
    return 1
}
gone() { wait_marked "$1" 0; }

# What a rank started dies with it, whether it stayed in the rank's
# process group (`sleep &`) or left it (setsid): its keeper kills both
# when the launcher is SIGKILLed (the ranks' death signal alone would
# leave them running) ...
test_launcher_killed_tree() {
    local mark="300.$$$RANDOM" tpid cpid
    timeout -k 5 60 "$CCOL" run -n 2 -- sh -c "sleep $mark & \
setsid sh -c 'exec sleep $mark' & wait" >"$TMP/out" 2>"$TMP/err" \
        </dev/null &
    tpid=$!
    wait_marked "$mark" 4
    cpid=$(pgrep -P "$tpid" -x ccol)
    if [ "$(wc -w <<<"$LEFT")" != 4 ] || [ -z "$cpid" ]; then
        bad launcher_killed_tree "not started: '$LEFT' launcher '$cpid'"
        kill -KILL $tpid $LEFT 2>/dev/null
        { wait "$tpid"; } 2>/dev/null
        return
    fi
    kill -KILL "$cpid"
    gone "$mark"
    { wait "$tpid"; } 2>/dev/null
    if [ -n "$LEFT" ]; then
        kill -KILL $LEFT 2>/dev/null
        bad launcher_killed_tree "outlived the launcher by 5 s: $LEFT"
        return
    fi
    ok launcher_killed_tree
}

# ... and when a rank is killed (the launcher then stops the other rank,
# whose keeper kills what it started too), with the rank's status
# reported as before.
test_rank_killed_tree() {
    local mark="300.$$$RANDOM" tpid rc
    timeout -k 5 60 "$CCOL" run -n 2 -- sh -c "echo \$\$ > $TMP/kpid.\$RANK; \
sleep $mark & setsid sh -c 'exec sleep $mark' & wait" >"$TMP/out" \
        2>"$TMP/err" </dev/null &
    tpid=$!
    if ! wait_marked "$mark" 4 || [ ! -s "$TMP/kpid.1" ]; then
        bad rank_killed_tree "not started: '$LEFT'"
        kill -KILL $tpid $LEFT 2>/dev/null
        { wait "$tpid"; } 2>/dev/null
        return
    fi
    kill -KILL "$(cat "$TMP/kpid.1")"
    wait "$tpid"
    rc=$?
    gone "$mark"
    if [ -n "$LEFT" ]; then
        kill -KILL $LEFT 2>/dev/null
        bad rank_killed_tree "outlived their rank by 5 s: $LEFT"
        return
    fi
    [ "$rc" = 137 ] && grep -q 'rank 1 was killed by signal 9' "$TMP/err" ||
        { bad rank_killed_tree "exit $rc: $(cat "$TMP/err")"; return; }
    ok rank_killed_tree
}

# A rank that ends leaves nothing behind either: its exit status is the
# launcher's, at once (no wait for the pipes a leftover would hold).
test_rank_exit_tree() {
    local mark="300.$$$RANDOM" t0 t1
    t0=$(now_ms)
    run -n 2 -- sh -c "sleep $mark & setsid sh -c 'exec sleep $mark' & \
echo up"
    t1=$(now_ms)
    gone "$mark"
    if [ -n "$LEFT" ]; then
        kill -KILL $LEFT 2>/dev/null
        bad rank_exit_tree "outlived their rank: $LEFT"
        return
    fi
    [ "$RC" = 0 ] && [ "$(grep -c 'up$' <<<"$OUT")" = 2 ] &&
        [ $((t1 - t0)) -lt 1500 ] ||
        { bad rank_exit_tree "rc=$RC after $((t1 - t0)) ms: $OUT $ERR"; return; }
    ok rank_exit_tree
}

# Ranks never run the launcher's handlers: a rank that gets SIGTERM while
# just forked must not make the launcher report a signal nobody sent it.
# Rank 0 fails at once, so the others are stopped as they start.
test_no_phantom_signal() {
    local i
    for i in 1 2 3; do
        run -n 48 -- sh -c '[ "$RANK" = 0 ] && exit 3; exec sleep 30'
        if [ "$RC" != 3 ] || grep -q "received signal" <<<"$ERR"; then
            bad no_phantom_signal "round $i: rc=$RC err=$ERR"
            return
        fi
    done
    ok no_phantom_signal
}

test_env
test_launcher_killed
test_launcher_killed_tree
test_rank_killed_tree
test_rank_exit_tree
test_no_phantom_signal
test_transport_default
test_master_addr
test_nproc_aliases
test_prefix
test_long_line
test_exit_status
test_fail_stops_sleeper
test_sigkill_escalation
test_signal_death
test_sigint
test_usage
test_exec_failure
test_free_port
test_stdin
test_comm_job "${2:-}"
test_torchrun_spellings
test_nodes "${2:-}"
test_ranks_filter "${2:-}"
test_log_dir
test_usage_nodes

echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
