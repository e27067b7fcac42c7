#!/usr/bin/env bash
# test_dyn_cli.sh - `ccol dyn merge`: outputs for the worked examples
# (docs/design.md, "ccol dyn merge", byte for byte, PyTorch's worked merges) and clear errors
# with exit status 1 for malformed observation files, 2 for usage errors.
# Usage: bash test_dyn_cli.sh PATH-OF-CCOL SOURCE-DIR
set -u
CCOL=${1:?usage: test_dyn_cli.sh PATH-OF-CCOL SOURCE-DIR}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0

ok() { pass=$((pass + 1)); echo "ok $1"; }
bad() {
    fail=$((fail + 1))
    echo "not ok $1"
    printf '%s\n' "$2" | sed 's/^/  /'
}

# write NAME JSON: writes $TMP/NAME.json
write() { printf '%s\n' "$2" > "$TMP/$1.json"; }

# expect NAME WANT-STDOUT FILE...: exit 0 and exact stdout
expect() {
    local name=$1 want=$2 got rc
    shift 2
    got=$("$CCOL" dyn merge "$@" 2>"$TMP/err")
    rc=$?
    if [ $rc -eq 0 ] && [ "$got" = "$want" ]; then
        ok "$name"
    else
        bad "$name" "rc=$rc
got:  $got
want: $want
stderr: $(cat "$TMP/err")"
    fi
}

# expect_err NAME RC NEEDLE ARGS...: exit RC, stderr contains NEEDLE,
# nothing on stdout
expect_err() {
    local name=$1 want_rc=$2 needle=$3 out rc
    shift 3
    out=$("$CCOL" dyn "$@" 2>"$TMP/err")
    rc=$?
    if [ $rc -eq "$want_rc" ] && grep -qF -- "$needle" "$TMP/err" &&
        [ -z "$out" ]; then
        ok "$name"
    else
        bad "$name" "rc=$rc (want $want_rc), stdout: $out
stderr: $(cat "$TMP/err")
want in stderr: $needle"
    fi
}

cd "$TMP" || exit 1

# docs/design.md, "ccol dyn merge", byte for byte.
write r0 "{\"L['x']\": {\"size\": [5, 10], \"stride\": [10, 1]}, \"L['y']\": {\"scalar\": 3}}"
write r1 "{\"L['x']\": {\"size\": [6, 10], \"stride\": [10, 1]}, \"L['y']\": {\"scalar\": 3}}"
expect design_4_2 "{\"L['x']\": {\"render\": \"tensor size=[?, 10] stride=[S(1), 1]\", \"dynamic\": [\"L['x'].size(0)\"]},
 \"L['y']\": {\"render\": \"scalar 3\", \"dynamic\": []}}" r0.json r1.json

# One file: everything static, strides inferred.
expect single_rank "{\"L['x']\": {\"render\": \"tensor size=[5, 10] stride=[S(1), 1]\", \"dynamic\": []},
 \"L['y']\": {\"render\": \"scalar 3\", \"dynamic\": []}}" r0.json

# Dimensionality mismatch: whole size and stride dynamic.
write d0 "{\"L['x']\": {\"size\": [4, 2]}}"
write d1 "{\"L['x']\": {\"size\": [3]}}"
expect dim_mismatch "{\"L['x']\": {\"render\": \"fully dynamic scalar or tensor\", \"dynamic\": [\"L['x'].size(0)\", \"L['x'].size(1)\"]}}" d0.json d1.json

# Tensor on one rank, int on another.
write t0 "{\"L['x']\": {\"size\": [10]}}"
write t1 "{\"L['x']\": {\"scalar\": 12}}"
expect type_mismatch "{\"L['x']\": {\"render\": \"fully dynamic scalar or tensor\", \"dynamic\": [\"L['x']\", \"L['x'].size(0)\"]}}" t0.json t1.json

# Source present on only some ranks; scalars 3, 7, 4.
write m0 "{\"L['xs'][0]\": {\"size\": [2, 3]}, \"L['y']\": {\"scalar\": 3}}"
write m1 "{\"L['y']\": {\"scalar\": 7}}"
write m2 "{\"L['y']\": {\"scalar\": 4}, \"L['xs'][1]\": {\"size\": [1]}}"
expect missing_source "{\"L['xs'][0]\": {\"render\": \"tensor size=[2, 3] stride=[S(1), 1]\", \"dynamic\": []},
 \"L['xs'][1]\": {\"render\": \"tensor size=[1] stride=[1]\", \"dynamic\": []},
 \"L['y']\": {\"render\": \"fully dynamic scalar or tensor\", \"dynamic\": [\"L['y']\"]}}" m0.json m1.json m2.json

# Floats render as Python's str(); 3 == 3.0 is static.
write f0 '{"a": {"scalar": 0.5}, "b": {"scalar": 2.0}, "c": {"scalar": 1e-05}, "d": {"scalar": 3}, "e": {"scalar": 1e16}}'
write f1 '{"a": {"scalar": 0.5}, "b": {"scalar": 2.0}, "c": {"scalar": 1e-05}, "d": {"scalar": 3.0}, "e": {"scalar": 1e16}}'
expect floats "{\"a\": {\"render\": \"scalar 0.5\", \"dynamic\": []},
 \"b\": {\"render\": \"scalar 2.0\", \"dynamic\": []},
 \"c\": {\"render\": \"scalar 1e-05\", \"dynamic\": []},
 \"d\": {\"render\": \"scalar 3\", \"dynamic\": []},
 \"e\": {\"render\": \"scalar 1e+16\", \"dynamic\": []}}" f0.json f1.json

# mark_dynamic on one rank reaches the merge.
write k0 "{\"L['x']\": {\"size\": [8, 4]}}"
write k1 "{\"L['x']\": {\"size\": [8, 4], \"mark_dynamic\": [1]}}"
expect mark_dynamic "{\"L['x']\": {\"render\": \"tensor size=[8, ?] stride=[S(1), 1]\", \"dynamic\": [\"L['x'].size(1)\"]}}" k0.json k1.json

# Same sizes, transposed on one rank: strides dynamic.
write s0 "{\"L['x']\": {\"size\": [2, 3], \"stride\": [3, 1]}}"
write s1 "{\"L['x']\": {\"size\": [2, 3], \"stride\": [1, 2]}}"
expect transposed "{\"L['x']\": {\"render\": \"tensor size=[2, 3] stride=[?, ?]\", \"dynamic\": [\"L['x'].stride(0)\", \"L['x'].stride(1)\"]}}" s0.json s1.json

# 0/1 sizes: dynamic in the lattice (specialized later, per rank).
write z0 "{\"L['x']\": {\"size\": [0]}}"
write z1 "{\"L['x']\": {\"size\": [1]}}"
expect zero_one "{\"L['x']\": {\"render\": \"tensor size=[?] stride=[1]\", \"dynamic\": [\"L['x'].size(0)\"]}}" z0.json z1.json

# --explain names the ranks.
expect explain "{\"L['x']\": {\"render\": \"tensor size=[?, 10] stride=[S(1), 1]\", \"dynamic\": [\"L['x'].size(0)\"], \"explain\": [\"L['x'].size(0) dynamic: 5 on rank 0, 6 on rank 1\"]},
 \"L['y']\": {\"render\": \"scalar 3\", \"dynamic\": [], \"explain\": []}}" --explain r0.json r1.json

# 3 and 3.0 are equal: the cause is the 4 on rank 2, not int against float.
write k0 '{"L['"'"'y'"'"']": {"scalar": 3}}'
write k1 '{"L['"'"'y'"'"']": {"scalar": 3.0}}'
write k2 '{"L['"'"'y'"'"']": {"scalar": 4}}'
expect explain_int_float "{\"L['y']\": {\"render\": \"fully dynamic scalar or tensor\", \"dynamic\": [\"L['y']\"], \"explain\": [\"L['y'] dynamic: 3 on rank 0, 4 on rank 2\"]}}" --explain k0.json k1.json k2.json
# A tensor against a number is the cause itself.
write k3 '{"L['"'"'y'"'"']": {"size": [2]}}'
expect explain_kinds "{\"L['y']\": {\"render\": \"fully dynamic scalar or tensor\", \"dynamic\": [\"L['y']\", \"L['y'].size(0)\"], \"explain\": [\"L['y'] dynamic: int on rank 0, 1 dim on rank 1\", \"L['y'].size(0) dynamic: int on rank 0, 1 dim on rank 1\"]}}" --explain k0.json k3.json

# Odd source names still list and explain (an exact source name wins).
write o0 '{"a.size(": {"scalar": 1}, "b.stride(0)": {"size": [4]}}'
write o1 '{"a.size(": {"scalar": 2}, "b.stride(0)": {"size": [5]}}'
expect odd_names "{\"a.size(\": {\"render\": \"fully dynamic scalar or tensor\", \"dynamic\": [\"a.size(\"], \"explain\": [\"a.size( dynamic: 1 on rank 0, 2 on rank 1\"]},
 \"b.stride(0)\": {\"render\": \"tensor size=[?] stride=[1]\", \"dynamic\": [\"b.stride(0).size(0)\"], \"explain\": [\"b.stride(0).size(0) dynamic: 4 on rank 0, 5 on rank 1\"]}}" --explain o0.json o1.json

write empty '{}'
expect empty_file "{}" empty.json

# Malformed files: exit 1, message names file, JSON path, expectation.
write e_arr '[1, 2]'
expect_err not_object 1 'e_arr.json: $: expected an object mapping source names' merge r0.json e_arr.json
write e_neg "{\"L['x']\": {\"size\": [5, -1]}}"
expect_err negative_size 1 "e_neg.json: \$[\"L['x']\"].size[1]: expected a non-negative integer, got -1" merge e_neg.json
write e_len '{"x": {"size": [5], "stride": [1, 2]}}'
expect_err stride_length 1 'e_len.json: $["x"].stride: expected 1 strides' merge e_len.json
write e_str '{"x": {"scalar": "3"}}'
expect_err scalar_string 1 'e_str.json: $["x"].scalar: expected a number (integer or float), got a string' merge e_str.json
write e_bool '{"x": {"scalar": true}}'
expect_err scalar_bool 1 '$["x"].scalar: expected a number (integer or float), got a boolean' merge e_bool.json
write e_mark '{"x": {"size": [2], "mark_dynamic": [1]}}'
expect_err mark_range 1 '$["x"].mark_dynamic[0]: expected an integer in [0, 0], got 1' merge e_mark.json
write e_key '{"x": {"size": [2], "sizes": [1]}}'
expect_err unknown_key 1 '$["x"]: unknown key "sizes"' merge e_key.json
write e_dup '{"x": {"scalar": 1}, "x": {"scalar": 2}}'
expect_err duplicate_key 1 'e_dup.json: line 1' merge e_dup.json
write e_trunc '{"x": {"size": [2]'
expect_err truncated 1 'e_trunc.json: line' merge e_trunc.json
write e_none '{"x": {}}'
expect_err no_kind 1 '$["x"]: expected a "size" (tensor) or a "scalar" (number) key' merge e_none.json
write e_both '{"x": {"scalar": 1, "size": [1]}}'
expect_err both_kinds 1 'expected either "scalar" or "size", not both' merge e_both.json
write e_float_size '{"x": {"size": [2.5]}}'
expect_err float_size 1 '$["x"].size[0]: expected an integer, got a float' merge e_float_size.json
write e_dims "{\"x\": {\"size\": [$(seq -s, 1 65)]}}"
expect_err too_many_dims 1 '$["x"].size: expected at most 64 elements, got 65' merge e_dims.json
write e_obj '{"x": [1]}'
expect_err source_not_object 1 '$["x"]: expected an object' merge e_obj.json
write e_empty_src '{"": {"scalar": 1}}'
expect_err empty_source 1 'expected a non-empty source name' merge e_empty_src.json
write e_big '{"x": {"scalar": 99999999999999999999999}}'
expect_err huge_int 1 'e_big.json: line 1' merge e_big.json
printf '' > e_zero.json
expect_err empty_input 1 'e_zero.json: line' merge e_zero.json
expect_err missing_file 1 'nope.json: cannot open' merge nope.json

# Usage errors: exit 2.
expect_err no_files 2 'no observation files given' merge
expect_err no_subcommand 2 'usage: ccol dyn merge'
expect_err bad_subcommand 2 "unknown subcommand 'frob'" frob
expect_err bad_option 2 "unknown option '--frob'" merge --frob r0.json

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
