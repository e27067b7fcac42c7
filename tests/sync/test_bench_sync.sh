#!/usr/bin/env bash
# test_bench_sync.sh - smoke test of `ccol bench sync`: it runs on inproc and
# tcp ranks, prints one JSON document, refuses bad options, and the bytes a
# rank receives per exchange are fewer with the join-reduce than with the
# all-gather from 4 ranks on (byte counts are deterministic, unlike times).
# Usage: bash test_bench_sync.sh <path-of-ccol> <source-dir>
set -u
ccol=$1
fail=0
passed=0
failed=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

check() { # check <description> <command...>
    local what=$1
    shift
    if "$@"; then
        echo "ok $what"
        passed=$((passed + 1))
    else
        echo "not ok $what"
        failed=$((failed + 1))
        fail=1
    fi
}

"$ccol" bench sync --max-ranks 4 --iters 3 --json >"$out" 2>/dev/null
check "bench sync exits 0" test $? -eq 0
check "one JSON document" grep -q '^{"suite": "sync", "sources": 20' "$out"
for t in inproc tcp; do
    for n in 2 4; do
        check "$t $n ranks ok" \
            grep -q "\"transport\": \"$t\", \"ranks\": $n, .*\"ok\": true" \
            "$out"
    done
done
line=$(grep '"transport": "tcp", "ranks": 4,' "$out")
join=$(sed -n 's/.*"join": {"rx_avg": \([0-9]*\).*/\1/p' <<<"$line")
gather=$(sed -n 's/.*"gather": {"rx_avg": \([0-9]*\).*/\1/p' <<<"$line")
check "join-reduce receives fewer bytes ($join < $gather)" \
    test "${join:-0}" -gt 0 -a "${join:-0}" -lt "${gather:-0}"

"$ccol" bench sync --iters 0 >/dev/null 2>&1
check "--iters 0 is refused with status 2" test $? -eq 2
"$ccol" bench sync --bogus >/dev/null 2>&1
check "an unknown option is refused with status 2" test $? -eq 2

echo "$passed passed, $failed failed"
exit $fail
