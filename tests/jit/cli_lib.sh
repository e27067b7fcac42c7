# cli_lib.sh - what the `ccol jit` end-to-end scripts share (sourced by
# test_cli.sh and test_profile_cli.sh, after they set CCOL and TMP):
# ok/bad count and print TAP-like lines, jit runs `ccol jit` under a
# timeout, details shows what the last run printed.
pass=0
fail=0
RC=0

ok() { pass=$((pass + 1)); echo "ok $1"; }
bad() {
    fail=$((fail + 1))
    echo "not ok $1"
    printf '%s\n' "$2" | head -40 | sed 's/^/  /'
}

# jit ARGS...: runs `ccol jit ARGS` (at most 120 s); stdout in $TMP/out,
# stderr in $TMP/err, exit status in $RC.
jit() {
    timeout 120 "$CCOL" jit "$@" >"$TMP/out" 2>"$TMP/err"
    RC=$?
}

details() {
    printf 'rc=%s\nstdout: %s\nstderr: %s\n' "$RC" \
        "$(head -c 3000 "$TMP/out")" "$(head -c 3000 "$TMP/err")"
}
