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
set -u

free_disk() {
    df -h --output=avail . 2>/dev/null | tail -1 | tr -d ' '
}

names=() times=() verdicts=()
failed=0
start_all=$(date +%s)

for part in "$@"; do
    name=${part%%=*}
    cmd=${part#*=}
    echo
    echo "==== $name: $cmd"
    echo "     (disk free here: $(free_disk))"
    t0=$(date +%s)
    bash -c "$cmd"
    rc=$?
    t1=$(date +%s)
    names+=("$name")
    times+=("$((t1 - t0))")
    if [ "$rc" = 0 ]; then
        verdicts+=("passed")
    else
        verdicts+=("FAILED (exit $rc)")
        failed=$((failed + 1))
    fi
done

echo
echo "==== summary ($(( $(date +%s) - start_all )) s; disk free: $(free_disk))"
for i in "${!names[@]}"; do
    printf '  %-34s %5s s  %s\n' "${names[$i]}" "${times[$i]}" "${verdicts[$i]}"
done
if [ "$failed" != 0 ]; then
    echo "  $failed part(s) failed: their failures are listed above, each"
    echo "  under its part's header (search for FAIL)."
    echo "  Deadlines scale with CCOL_TEST_TIMEOUT_MULT on a loaded machine."
    exit 1
fi
