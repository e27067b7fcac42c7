#!/usr/bin/env bash
# run_parts.sh - runs every part of a test command and reports them all.
#
# Usage: tests/run_parts.sh "NAME=COMMAND" ...
#
# Each part runs to its end whatever the parts before it did (a failing C
# test must not hide the Python suite's results), under a header that
# names it; each part prints its own progress. At the end one line per part
# gives its time and verdict, and the exit status is non-zero if any part
# failed. Each header and the summary also say how much disk is free (a
# full disk fails a part in ways that name something else).
#
# A failing part's output can be long and is often cut when shown; the
# summary repeats the lines that name what failed (ctest's failed tests,
# the C harness's FAIL lines, pytest's FAILED and ERROR lines), so the last
# screen says which test to look at.
set -u

free_disk() {
    df -h --output=avail . 2>/dev/null | tail -1 | tr -d ' '
}

names=() times=() verdicts=() culprits=()
failed=0
start_all=$(date +%s)
logdir=$(mktemp -d)
trap 'rm -rf "$logdir"' EXIT

# The lines of a part's output that name a failure, each once, in order
# (a nested run_parts.sh repeats its own, hence the dedup), at most 40.
failure_lines() {
    grep -E -a -h \
        -e '^[[:space:]]*[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess aborted|Child aborted|Exception|Not Run|ILLEGAL|BUS)' \
        -e '^[[:space:]]+FAIL ' -e '^(FAILED|ERROR) ' "$1" \
        | sed -E 's/^[[:space:]]+//' | awk '!seen[$0]++' | head -40
}

for part in "$@"; do
    name=${part%%=*}
    cmd=${part#*=}
    echo
    echo "==== $name: $cmd"
    echo "     (disk free here: $(free_disk))"
    t0=$(date +%s)
    log="$logdir/part${#names[@]}.log"
    bash -c "$cmd" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    t1=$(date +%s)
    names+=("$name")
    times+=("$((t1 - t0))")
    if [ "$rc" = 0 ]; then
        verdicts+=("passed")
    else
        verdicts+=("FAILED (exit $rc)")
        failed=$((failed + 1))
        culprits+=("$log")
    fi
done

echo
echo "==== summary ($(( $(date +%s) - start_all )) s; disk free: $(free_disk))"
for i in "${!names[@]}"; do
    printf '  %-34s %5s s  %s\n' "${names[$i]}" "${times[$i]}" "${verdicts[$i]}"
done
if [ "$failed" != 0 ]; then
    echo "  $failed part(s) failed: their failures are listed above, each"
    echo "  under its part's header (search for FAIL). What they name:"
    for log in "${culprits[@]}"; do
        failure_lines "$log" | sed 's/^/    /'
    done
    echo "  Deadlines scale with CCOL_TEST_TIMEOUT_MULT on a loaded machine."
    exit 1
fi
