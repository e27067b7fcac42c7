#!/usr/bin/env bash
# test_bench_jit.sh - `ccol bench jit` runs end to end and prints every row
# (1, 4, 16 inputs; 2, 4, 8 ranks over inproc and shm); usage errors exit 2.
# $1 is ccol.
set -u
ccol=$1
pass=0 fail=0
check() { if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; fi; }
out=$(timeout 300 "$ccol" bench jit --calls 200 2>&1)
rc=$?
echo "$out"
check "exit status" '[ $rc -eq 0 ]'
for n in 1 4 16; do
    check "row $n inputs" 'echo "$out" | grep -Eq "^$n +[0-9]+ +[0-9.]+ +[0-9]+"'
done
for n in 2 4 8; do
    # One row per rank count for inproc threads and one for shm processes.
    check "rows $n ranks" '[ "$(echo "$out" | grep -Ec "^$n +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+")" = 2 ]'
done
timeout 10 "$ccol" bench jit --calls 1 >/dev/null 2>&1
check "bad --calls is a usage error" '[ $? -eq 2 ]'
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
