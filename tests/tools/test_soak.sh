#!/usr/bin/env bash
# test_soak.sh - a short soak (500 compile exchanges and guard collectives at
# 8 ranks, inproc and tcp): memory must stay flat. Under the sanitizer build
# of the suite this is also the leak check of long runs. $1 is ccol.
set -u
ccol=$1
pass=0 fail=0
for t in inproc tcp; do
    out=$(timeout 300 "$ccol" bench soak -n 8 --iters 500 --transport $t 2>&1)
    rc=$?
    echo "$out"
    if [ $rc -eq 0 ] && echo "$out" | grep -q "soak: ok (memory flat)"; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL: soak over $t (exit $rc)"
    fi
done
timeout 10 "$ccol" bench soak -n 0 >/dev/null 2>&1
if [ $? -eq 2 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: usage"; fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
