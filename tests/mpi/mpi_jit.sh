#!/usr/bin/env bash
# mpi_jit.sh - `ccol jit` under mpirun over the MPI transport: jobs of 3
# and 4 ranks whose ranks see different shapes agree on every dynamic
# decision and give the same summary as local ranks over tcp (transport
# picked automatically, and with --transport mpi); --transport tcp without
# MASTER_PORT is a clear error; a rank that leaves early (R:exit: it
# finalizes MPI and exits 3) gives a summary naming the timeout and no
# hang; a rank killed by SIGKILL makes mpirun abort the job. Last,
# `ccol bench comm --transport mpi` starts its own mpirun and reports ccol
# against raw MPI for every row. Every mpirun runs under `timeout`.
# Usage: bash mpi_jit.sh PATH-OF-CCOL SOURCE-DIR
set -u
CCOL=${1:?usage: mpi_jit.sh PATH-OF-CCOL SOURCE-DIR}
SRC=$(cd "${2:?usage: mpi_jit.sh PATH-OF-CCOL SOURCE-DIR}" && pwd)
EX=$SRC/examples
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
unset MASTER_ADDR MASTER_PORT CCOL_JIT_TEST_KILL_RANK
pass=0
fail=0
RC=0

ok() { pass=$((pass + 1)); echo "ok $1"; }
bad() {
    fail=$((fail + 1))
    echo "not ok $1"
    printf 'rc=%s\nstdout: %s\nstderr: %s\n' "$RC" \
        "$(head -c 2000 "$TMP/out")" "$(head -c 2000 "$TMP/err")" |
        head -40 | sed 's/^/  /'
}

# mpi N ARGS...: `mpirun -n N ccol jit ARGS` (at most 120 s); stdout in
# $TMP/out, stderr in $TMP/err, exit status in $RC.
mpi() {
    local n=$1
    shift
    timeout 120 mpirun --allow-run-as-root --oversubscribe -n "$n" \
        "$CCOL" jit "$@" >"$TMP/out" 2>"$TMP/err"
    RC=$?
}

# check NAME CODE: runs python CODE with `j` the JSON summary on stdout
# and `rc` the exit status; an AssertionError fails the test.
check() {
    local msg
    if msg=$(python3 -S - "$TMP/out" "$RC" 2>&1 <<PY
import json, re, sys
rc = int(sys.argv[2])
j = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
$2
PY
    ); then
        ok "$1"
    else
        bad "$1"
        printf '%s\n' "$msg" | tail -5 | sed 's/^/  /'
    fi
}

# The mlp example for 3 ranks: the first three argument lists of each call.
python3 -S - "$EX/mlp.json" "$TMP/mlp3.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
for c in s["calls"]:
    c["per_rank"] = c["per_rank"][:3]
json.dump(s, open(sys.argv[2], "w"))
PY
cp "$EX/mlp.json" "$TMP/mlp4.json"

AGREE='
assert rc == 0, f"exit status {rc}"
assert j["ok"] is True and j["world_size"] == N, j
ranks = j["ranks"]
assert [r["rank"] for r in ranks] == list(range(N))
assert all(r["ok"] and r["error"] is None for r in ranks)
dyn = [[(f["name"], f["dynamic"], f["compiles"]) for f in r["frames"]]
       for r in ranks]
assert all(d == dyn[0] for d in dyn), dyn
assert any(f[1] for f in dyn[0]), "no dynamic dimension: shapes differ"
local = json.load(open(sys.argv[1] + ".local"))
assert local == j, "differs from local ranks over tcp"'

for n in 3 4; do
    timeout 120 "$CCOL" jit "$EX/mlp.tl" --schedule "$TMP/mlp$n.json" \
        --json -n "$n" >"$TMP/out.local" 2>/dev/null
    mpi "$n" "$EX/mlp.tl" --schedule "$TMP/mlp$n.json" --json --timeout 30
    check "mpirun -n $n: automatic transport, ranks agree" "N = $n$AGREE"
    MASTER_PORT=1 mpi "$n" "$EX/mlp.tl" --schedule "$TMP/mlp$n.json" \
        --json --timeout 30 --transport mpi
    check "mpirun -n $n: --transport mpi overrides MASTER_PORT" \
        "N = $n$AGREE"
done

mpi 3 "$EX/mlp.tl" --schedule "$TMP/mlp3.json" --transport tcp
if [ "$RC" -ne 0 ] && [ "$RC" -ne 124 ] &&
    grep -q "MASTER_PORT is not set" "$TMP/err"; then
    ok "--transport tcp under mpirun without MASTER_PORT: clear error"
else
    bad "--transport tcp under mpirun without MASTER_PORT: clear error"
fi

mpi 3 "$EX/mlp.tl" --schedule "$TMP/mlp4.json" --json
if [ "$RC" -eq 2 ] && grep -q "4 argument lists for 3 ranks" "$TMP/err"
then
    ok "schedule for 4 ranks under mpirun -n 3: exit status 2"
else
    bad "schedule for 4 ranks under mpirun -n 3: exit status 2"
fi

for n in 3 4; do
    CCOL_JIT_TEST_KILL_RANK=2:exit mpi "$n" "$EX/mlp.tl" \
        --schedule "$TMP/mlp$n.json" --json --timeout 3
    check "mpirun -n $n: rank 2 exits early, summary and no hang" "
assert rc not in (0, 124), f'exit status {rc}'
assert j['ok'] is False and j['world_size'] == $n, j
r0 = j['ranks'][0]
assert r0['ok'] is False and r0['error']['code'] == 'TIMEOUT', r0
assert 'timed out after 3 s' in r0['error']['message'], r0
assert r0['frames'], 'rank 0 lost its own statistics'
err = open(sys.argv[1].replace('out', 'err')).read()
assert 'did a rank exit?' in err, err
# mpirun names the first rank that ended with a non-zero status: rank 2
# (exit 3) or, when its exit is slow (under ASan), a survivor (exit 1).
assert re.search(r'Exit code: +[13]\\b', err), err"
done

CCOL_JIT_TEST_KILL_RANK=1 mpi 3 "$EX/mlp.tl" --schedule "$TMP/mlp3.json" \
    --json --timeout 3
if [ "$RC" -ne 0 ] && [ "$RC" -ne 124 ] &&
    grep -q "rank 1 .*signal 9" "$TMP/err"; then
    ok "mpirun -n 3: rank 1 killed, mpirun aborts the job"
else
    bad "mpirun -n 3: rank 1 killed, mpirun aborts the job"
fi

timeout 120 "$CCOL" bench comm --transport mpi -n 2 --iters 5 \
    --sizes 64 --json >"$TMP/out" 2>"$TMP/err"
RC=$?
check "bench comm --transport mpi -n 2: ccol and MPI rows" "
assert rc == 0, f'exit status {rc}'
assert j['ok'] is True and j['transport'] == 'mpi', j
ops = sorted(r['op'] for r in j['rows'])
assert ops == ['allgatherv', 'allreduce_f64', 'allreduce_i64', 'barrier',
               'bcast', 'join_reduce'], ops
for r in j['rows']:
    assert r['ranks'] == 2 and r['ccol_median_us'] > 0, r
    assert r['mpi_median_us'] > 0 and r['ratio'] > 0, r"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
