#!/usr/bin/env bash
# test_soak.sh - a short soak (500 compile exchanges and guard collectives at
# 8 ranks, inproc and tcp): memory must stay flat. Under the sanitizer build
# of the suite this is also the leak check of long runs. Also: a strict
# --timeout and CCOL_TIMEOUT, and a stopped rank ends the run with its name
# (with the deadline of either). $1 is ccol.
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
for bad in 0x10 1e-9 inf; do
    timeout 10 "$ccol" bench soak --timeout $bad >/dev/null 2>&1
    if [ $? -eq 2 ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL: --timeout $bad accepted"
    fi
done
# CCOL_TIMEOUT, as every entry point reads it: a malformed value (or one
# above the soak's limit on --timeout) is refused naming it, exit 2; a
# good one runs (and bounds the run: stopped_rank below).
for bad in junk 0x10 '' 1e5; do
    err=$(CCOL_TIMEOUT=$bad timeout 10 "$ccol" bench soak -n 2 --iters 10 \
        2>&1 >/dev/null)
    rc=$?
    if [ $rc -eq 2 ] && grep -qF "CCOL_TIMEOUT='$bad'" <<<"$err"; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL: CCOL_TIMEOUT='$bad': exit $rc: $err"
    fi
done
out=$(CCOL_TIMEOUT=30 timeout 60 "$ccol" bench soak -n 2 --iters 10 2>&1)
if [ $? -eq 0 ] && grep -q "soak: ok" <<<"$out"; then
    pass=$((pass + 1))
else
    fail=$((fail + 1))
    echo "FAIL: CCOL_TIMEOUT=30: $out"
fi

# A rank stopped by SIGSTOP over tcp: its peers time out (2 s deadline,
# from --timeout or CCOL_TIMEOUT; the default is 60 s) and the run ends
# naming the stopped rank, instead of waiting for it.
# Usage: stopped_rank [VAR=VALUE] [SOAK-ARGS...]
stopped_rank() {
    local out t p k i rc t0 kv=
    case ${1:-} in *=*) kv=$1; shift ;; esac
    out=$(mktemp "${TMPDIR:-/tmp}/ccol-soak.XXXXXX")
    timeout 60 env $kv "$ccol" bench soak -n 3 --iters 100000000 \
        --transport tcp "$@" >"$out" 2>&1 &
    t=$!
    for i in $(seq 200); do
        p=$(pgrep -P "$t")
        [ -n "$p" ] && [ "$(pgrep -P "$p" | wc -l)" = 3 ] && break
        sleep 0.05
    done
    k=$([ -n "$p" ] && pgrep -P "$p" | sed -n 2p)
    if [ -z "$k" ]; then
        kill "$t" 2>/dev/null
        wait "$t"
        rm -f "$out"
        echo "FAIL: stopped_rank $kv $*: the ranks did not start"
        return 1
    fi
    sleep 0.3
    kill -STOP "$k"
    t0=$(date +%s)
    wait "$t"
    rc=$?
    cat "$out"
    if [ $rc -eq 1 ] && [ $(($(date +%s) - t0)) -lt 30 ] &&
        grep -q "rank [0-9] was stopped by signal" "$out" &&
        grep -q "timed out after 2 s" "$out"; then
        rm -f "$out"
        return 0
    fi
    rm -f "$out"
    echo "FAIL: stopped_rank $kv $*: exit $rc"
    return 1
}
if stopped_rank --timeout 2; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
if stopped_rank CCOL_TIMEOUT=2; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
