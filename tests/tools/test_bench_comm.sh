#!/usr/bin/env bash
# test_bench_comm.sh - tests of `ccol bench comm`: usage errors, a short
# run of each transport in text and JSON form, the message printed when
# the MPI baseline is not installed, and the gloo baseline.
# Usage: bash test_bench_comm.sh <path-of-ccol> <source-dir>
set -u

CCOL=${1:?usage: test_bench_comm.sh <path-of-ccol> <source-dir>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ccol-test-bench.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
PASS=0
FAIL=0

ok() { PASS=$((PASS + 1)); echo "ok   $1"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL $1: $2"; }

bench() {
    timeout -k 5 300 "$CCOL" bench comm "$@" >"$TMP/out" 2>"$TMP/err"
    RC=$?
    OUT=$(cat "$TMP/out")
    ERR=$(cat "$TMP/err")
}

test_usage() {
    local args
    for args in "-n 1" "-n 65" "-n x" "--iters 0" "--iters" "--sizes 1,,2" \
        "--sizes 64," "--sizes -5" "--sizes 99999999999" "--transport pigeon" \
        "--frob"; do
        # shellcheck disable=SC2086
        bench $args
        [ "$RC" = 2 ] && [ -n "$ERR" ] ||
            { bad usage "'$args' gave $RC ($ERR)"; return; }
    done
    bench --help
    [ "$RC" = 0 ] && grep -q 'usage: ccol bench comm' <<<"$OUT" ||
        { bad usage "--help gave $RC"; return; }
    ok usage
}

test_text() {
    local t
    for t in inproc tcp shm; do
        bench -n 3 --transport "$t" --iters 5 --sizes 16,100 --no-tree \
            --no-mpi --no-gloo --no-auth
        [ "$RC" = 0 ] || { bad text "$t: exit $RC: $ERR"; return; }
        # 3 sized ops x 2 sizes + 2 allreduces + barrier = 9 rows.
        [ "$(grep -c "^$t  *3 " <<<"$OUT")" = 9 ] ||
            { bad text "$t rows: $OUT"; return; }
        grep -q "^$t  *3 join_reduce  *100 " <<<"$OUT" ||
            { bad text "$t: no join_reduce 100 row"; return; }
    done
    ok text
}

test_json() {
    bench -n 2 --iters 5 --sizes 64 --no-mpi --no-gloo --json
    [ "$RC" = 0 ] || { bad json "exit $RC: $ERR"; return; }
    [ "$(head -c1 <<<"$OUT")" = "{" ] && [ "$(tail -c2 <<<"$OUT")" = "}" ] ||
        { bad json "not one object: $OUT"; return; }
    grep -q '"ok": true' <<<"$OUT" || { bad json "not ok"; return; }
    # 3 transports x 6 rows, plus 6 star/tree configs x 3 rows.
    [ "$(grep -c '"median_us"' <<<"$OUT")" = 18 ] ||
        { bad json "rows: $(grep -c '"median_us"' <<<"$OUT")"; return; }
    [ "$(grep -c '"star_us"' <<<"$OUT")" = 18 ] ||
        { bad json "tree rows: $(grep -c '"star_us"' <<<"$OUT")"; return; }
    grep -q '"verdict"' <<<"$OUT" || { bad json "no verdict"; return; }
    # tcp without and with a token: 4 rows at 2 ranks.
    [ "$(grep -c '"tagged_us"' <<<"$OUT")" = 4 ] ||
        { bad json "auth rows: $(grep -c '"tagged_us"' <<<"$OUT")"; return; }
    if command -v python3 >/dev/null; then
        python3 -c 'import json,sys; json.load(sys.stdin)' <<<"$OUT" ||
            { bad json "python cannot parse it"; return; }
    fi
    ok json
}

test_no_mpi() {
    local want='MPI baseline: not available (install openmpi-bin'
    timeout -k 5 300 env PATH=/nonexistent "$CCOL" bench comm -n 2 \
        --transport inproc --iters 3 --sizes 8 --no-tree --no-gloo \
        >"$TMP/out" 2>&1
    RC=$?
    [ "$RC" = 0 ] || { bad no_mpi "exit $RC: $(cat "$TMP/out")"; return; }
    grep -qF "$want libopenmpi-dev)" "$TMP/out" ||
        { bad no_mpi "no message: $(cat "$TMP/out")"; return; }
    ok no_mpi
}

test_mpi() {
    local dir
    dir=$(dirname "$CCOL")
    if ! command -v mpirun >/dev/null || [ ! -x "$dir/ccol-mpi-coll" ]; then
        echo "skip mpi: mpirun or ccol-mpi-coll not installed"
        ok mpi
        return
    fi
    bench -n 2 --transport tcp --iters 5 --sizes 64 --no-tree --no-gloo \
        --no-auth
    [ "$RC" = 0 ] || { bad mpi "exit $RC: $ERR"; return; }
    # Every row has an MPI figure and a ratio.
    [ "$(grep -cE '^tcp +2 [a-z_0-9]+ .* [0-9.]+ +[0-9.]+$' <<<"$OUT")" = 6 ] ||
        { bad mpi "no ratios: $OUT"; return; }
    ok mpi
}

# The gloo baseline runs when torch is importable, else says why not.
test_gloo() {
    bench -n 2 --transport shm --iters 5 --sizes 64 --no-tree --no-mpi
    [ "$RC" = 0 ] || { bad gloo "exit $RC: $ERR"; return; }
    if grep -q 'gloo baseline: not available' <<<"$OUT"; then
        ok gloo
        return
    fi
    [ "$(grep -cE '^shm +2 [a-z_0-9]+ .* [0-9.]+ +[0-9.]+$' <<<"$OUT")" = 6 ] ||
        { bad gloo "no gloo ratios: $OUT"; return; }
    ok gloo
}

# tcp without vs with a token: the four rows, each with a ratio, after
# the table's own header.
test_auth() {
    bench -n 2 --transport tcp --iters 5 --sizes 64 --no-tree --no-mpi \
        --no-gloo
    [ "$RC" = 0 ] || { bad auth "exit $RC: $ERR"; return; }
    [ "$(sed -n '/without a token vs with one/,$p' <<<"$OUT" |
        grep -cE '^tcp +2 [a-z_0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$')" = 4 ] ||
        { bad auth "rows: $OUT"; return; }
    ok auth
}

test_usage
test_text
test_auth
test_json
test_no_mpi
test_mpi
test_gloo

echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
