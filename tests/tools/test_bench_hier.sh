#!/usr/bin/env bash
# test_bench_hier.sh - `ccol bench hier` runs both modes end to end (it
# fails unless the jobs ran over tcp+shm and flat tcp as asked) and prints
# a row per operation whose ratio is hier/flat of its medians; bad options
# are usage errors (exit 2). $1 is ccol.
set -u
ccol=$1
pass=0 fail=0
check() { if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; fi; }
out=$(timeout 300 "$ccol" bench hier -n 5 --hosts 2 --iters 20 --rounds 1 2>&1)
rc=$?
echo "$out"
check "exit status" '[ $rc -eq 0 ]'
check "header" 'echo "$out" | grep -q "^5 ranks on 2 hosts"'
for op in "barrier" "allreduce_i64" "allgatherv 64 B"; do
    row=$(echo "$out" | grep -E "^$op +[0-9.]+ +[0-9.]+ +[0-9.]+x$")
    check "row $op" '[ -n "$row" ]'
    # the ratio printed is hier/flat of the two medians, to the rounding:
    # each median is printed to 0.05 us and the ratio to 0.005, so h/f of
    # the printed medians may be off by r (0.05/f + 0.05/h) + 0.005 (a
    # 91.8 us median and a ratio of 31.63 allow 0.023)
    check "ratio $op" 'echo "$row" | awk "{f=\$(NF-2); h=\$(NF-1); r=\$NF; sub(\"x\",\"\",r); d=h/f-r; if (d<0) d=-d; exit !(d <= r*(0.06/f + 0.06/h) + 0.006)}"'
done
timeout 10 "$ccol" bench hier -n 4 --hosts 4 >/dev/null 2>&1
check "as many hosts as ranks is refused" '[ $? -eq 2 ]'
timeout 10 "$ccol" bench hier --iters 0 >/dev/null 2>&1
check "bad --iters is a usage error" '[ $? -eq 2 ]'
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
