#!/usr/bin/env bash
# test_faults.sh - a bounded fault campaign: 24 random faults in real
# `ccol jit` jobs over shm and tcp in turn; every surviving rank must name
# the faulty rank (or succeed), with no hang and no crash. $1 is the ccol
# binary.
set -u
ccol=$1
out=$(timeout 600 "$ccol" bench faults --trials 24 --seed 5 --timeout 1 2>&1)
rc=$?
echo "$out"
if [ $rc -eq 0 ] && echo "$out" | grep -q "^24 trials, 0 failed$"; then
    echo "1 passed, 0 failed"
    exit 0
fi
echo "0 passed, 1 failed"
exit 1
