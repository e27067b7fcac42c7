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
# Nothing is left behind: each part runs with TMPDIR set to a directory of
# its own (torch's compile caches, torchrun's logs, pytest's tmp_path all
# go there; the test ports' blocks are held by abstract sockets, no file),
# removed when the part ends; at the end,
# anything of this user's that is new in /tmp or /dev/shm since the run
# began is named, and fails the run.
#
# A failing part's output can be long and is often cut when shown; the
# summary repeats the lines that name what failed (ctest's failed tests,
# the C harness's FAIL lines, pytest's FAILED and ERROR lines), so the last
# screen says which test to look at.
set -u

free_disk() {
    df -h --output=avail . 2>/dev/null | tail -1 | tr -d ' '
}

# The entries of this user's in /tmp and /dev/shm, one "dir/name" a line.
own_entries() {
    find "$tmproot" /dev/shm -mindepth 1 -maxdepth 1 -user "$(id -u)" \
        2>/dev/null | sort
}

names=() times=() verdicts=() culprits=()
failed=0
start_all=$(date +%s)
tmproot=${TMPDIR:-/tmp}
logdir=$(mktemp -d "$tmproot/ccol-parts.XXXXXX")
# others may pass through (not list): a test run as another user reaches
# the directories its part made for it, as it would under /tmp
chmod 711 "$logdir"
trap 'rm -rf "$logdir"' EXIT
before=$(own_entries)

# The lines of a part's output that name a failure, each once, in order
# (a nested run_parts.sh repeats its own, hence the dedup), at most 40.
failure_lines() {
    grep -E -a -h \
        -e '^[[:space:]]*[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess aborted|Child aborted|Exception|Not Run|ILLEGAL|BUS)' \
        -e '^[[:space:]]+FAIL ' -e '^(FAILED|ERROR|LEFT BEHIND) ' "$1" \
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
    scratch=$(mktemp -d "$logdir/tmp.XXXXXX") && chmod 711 "$scratch"
    TMPDIR=$scratch bash -c "$cmd" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    rm -rf "$scratch"
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

# What the parts left behind, outside their own directories.
left=$(comm -13 <(echo "$before") <(own_entries | grep -v -x -F "$logdir"))
names+=("nothing left in /tmp, /dev/shm")
times+=("0")
if [ -z "$left" ]; then
    verdicts+=("passed")
else
    verdicts+=("FAILED (new: $(echo "$left" | wc -l))")
    failed=$((failed + 1))
    echo "$left" | sed 's/^/LEFT BEHIND /' > "$logdir/left.log"
    culprits+=("$logdir/left.log")
fi

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
