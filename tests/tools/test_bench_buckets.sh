#!/usr/bin/env bash
# test_bench_buckets.sh - `ccol bench buckets`: its JSON keys and their
# meaning on a generated trace (equal digests, no size outside the agreed
# set, the consensus near the offline optimum and under power-of-two tiers
# and per-step padding), and the trace and options refused with a message.
# Usage: bash test_bench_buckets.sh <path-of-ccol>
set -u
CCOL=${1:?usage: test_bench_buckets.sh <path-of-ccol>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ccol-test-buckets.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
PASS=0 FAIL=0
ok() { PASS=$((PASS + 1)); echo "ok   $1"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL $1: $2"; }

# 160,000 heavy-tailed lengths (log-normal, median 200, sigma 1.2, at most
# 8192) whose median moves to 450 halfway (awk's rand with a fixed seed:
# the same file on every run); the issue's targets, all in one run
awk 'BEGIN { srand(3); for (i = 0; i < 160000; i++) {
        u = rand(); v = rand(); z = sqrt(-2 * log(u + 1e-12)) * cos(6.2832 * v);
        m = i < 80000 ? log(200) : log(450);
        l = int(exp(m + 1.2 * z)); if (l < 1) l = 1; if (l > 8192) l = 8192;
        print l } }' >"$TMP/trace"

out=$(timeout -k 5 120 "$CCOL" bench buckets --trace "$TMP/trace" --ranks 4 \
      --per-rank 8 --k 8 --json 2>&1)
rc=$?
if [ "$rc" = 0 ] && python3 - "$out" <<'PY'
import json, sys
d = json.loads(sys.argv[1])
keys = {"padding_consensus", "padding_optimal", "padding_pow2",
        "padding_step_max", "graphs_per_rank", "recompiles_after_agreement",
        "bytes_per_rank_per_agreement", "digests_equal"}
assert keys <= set(d), sorted(keys - set(d))
assert d["digests_equal"] is True and d["recompiles_after_agreement"] == 0
assert d["bytes_per_rank_per_agreement"] <= 512
c = d["padding_consensus"]
assert c <= 1.15 * d["padding_optimal"], d
assert c <= 0.5 * d["padding_pow2"] and c <= 0.33 * d["padding_step_max"], d
assert d["agreements"] > 1 and d["graphs_per_rank"] >= 8, d
PY
then ok json_keys_and_figures
else bad json_keys_and_figures "rc=$rc: $out"
fi

out=$("$CCOL" bench buckets --trace "$TMP/trace" --ranks 4 --per-rank 8 \
      --k 8 2>&1)
if grep -q "consensus buckets (agreed)" <<<"$out" &&
    grep -q "digests equal on every rank at every agreement" <<<"$out"; then
    ok table
else bad table "$out"
fi

# refused, exit status 2, naming what is wrong
refused() {
    local name=$1 want=$2 got rc
    shift 2
    got=$("$CCOL" bench buckets "$@" 2>&1)
    rc=$?
    if [ "$rc" = 2 ] && grep -qF -- "$want" <<<"$got"; then
        ok "$name"
    else
        bad "$name" "rc=$rc, wanted '$want' in: $got"
    fi
}
printf '12\n7x\n' >"$TMP/bad"
refused bad_line "$TMP/bad:2: '7x' is not a length" --trace "$TMP/bad" \
    --ranks 2 --per-rank 1 --k 2
: >"$TMP/empty"
refused empty_trace "holds no length" --trace "$TMP/empty" --ranks 2 \
    --per-rank 1 --k 2
refused missing_file "cannot open $TMP/nothing" --trace "$TMP/nothing" \
    --ranks 2 --per-rank 1 --k 2
refused missing_option "--trace, --ranks, --per-rank and --k are required" \
    --trace "$TMP/trace" --ranks 2
refused big_k "--k wants a whole number in 1..32" --trace "$TMP/trace" \
    --ranks 2 --per-rank 1 --k 33
refused bad_margin "--margin wants a number in 0..100" --trace \
    "$TMP/trace" --ranks 2 --per-rank 1 --k 2 --margin nan
printf '12\n7\n9\n' >"$TMP/short"
refused short_trace "fewer than --warmup" --trace "$TMP/short" --ranks 2 \
    --per-rank 1 --k 2 --warmup 5
refused over_max "above --max-len 100" --trace "$TMP/trace" --ranks 2 \
    --per-rank 1 --k 2 --max-len 100
refused low_budget "--budget 4 is below --k 8" --trace "$TMP/trace" \
    --ranks 2 --per-rank 1 --k 8 --budget 4

# a budget of K: at most K sizes over the whole run, on every rank
out=$("$CCOL" bench buckets --trace "$TMP/trace" --ranks 4 --per-rank 8 \
      --k 8 --warmup 16 --budget 8 --json 2>&1)
if python3 - "$out" <<'PY'
import json, sys
d = json.loads(sys.argv[1])
assert d["budget"] == 8 and d["sizes_agreed"] <= 8, d
assert d["graphs_per_rank"] <= 8 and d["digests_equal"] is True, d
PY
then ok budget
else bad budget "$out"
fi

echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
