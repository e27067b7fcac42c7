#!/usr/bin/env bash
# test_bench_scale.sh - `ccol bench scale` runs end to end: a row per job
# size (2 to 64 ranks) in both tables, modelled rows for 10^4 and 10^5
# ranks, the join-reduce's bytes per rank flat in a tree (--threshold 4:
# a tree above 4 ranks) while the all-gather's grow with the ranks, one
# JSON object with --json; usage errors exit 2. $1 is ccol.
set -u
ccol=$1
pass=0 fail=0
check() { if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; fi; }
out=$(timeout 300 "$ccol" bench scale --max-ranks 64 --iters 3 --threshold 4 2>&1)
rc=$?
echo "$out"
check "exit status" '[ $rc -eq 0 ]'
for n in 2 4 8 16 32 64; do
    # One row in the bytes table and one in the latency table.
    check "rows $n ranks" '[ "$(echo "$out" | grep -Ec "^ *$n +[0-9]+(/[0-9]+)? +\| +[0-9.]+ ")" = 2 ]'
done
for n in 10000 100000; do
    check "modelled rows $n ranks" '[ "$(echo "$out" | grep -Ec "^ *$n +(model|[0-9]+) +\| +- ")" = 2 ]'
done
# Bytes table, fields: ranks depth | join med, join max | model, model |
# gather med, gather max | model, model.
field() { echo "$out" | awk -v n="$1" -v f="$2" '/^bytes/ { on = 1 } /^latency/ { on = 0 } on && $1 == n { print $f; exit }'; }
j8=$(field 8 4) j64=$(field 64 4) g8=$(field 8 10) g64=$(field 64 10)
echo "join B/rank: 8 ranks $j8, 64 ranks $j64; all-gather: $g8, $g64"
check "join-reduce bytes per rank flat" 'awk -v a="$j64" -v b="$j8" "BEGIN { exit !(b > 0 && a / b < 2) }"'
check "all-gather bytes per rank grow" 'awk -v a="$g64" -v b="$g8" "BEGIN { exit !(b > 0 && a / b > 4) }"'
json=$(timeout 120 "$ccol" bench scale --max-ranks 4 --iters 2 --json 2>/dev/null)
check "json exit status" '[ $? -eq 0 ]'
check "json one object" 'echo "$json" | grep -q "^{\"suite\": \"scale\"" && [ "$(echo "$json" | grep -c "\"ranks\": ")" = 4 ]'
for bad in "--max-ranks 1" "--max-ranks x" "--iters 0" "--iters" "--threshold 0" "--bogus"; do
    timeout 10 "$ccol" bench scale $bad >/dev/null 2>&1
    check "bad option '$bad' is a usage error" '[ $? -eq 2 ]'
done
timeout 10 "$ccol" bench scale --help | grep -q "usage: ccol bench scale"
check "--help" '[ $? -eq 0 ]'
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
