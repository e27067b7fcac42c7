#!/usr/bin/env bash
# ci_free_disk.sh - makes room before CI installs torch 2.14.1 (about
# 5.5 GB in .venv214): removes what the parts before it left and no later
# part needs (the sanitizer and fuzzing builds; Inductor's caches and
# pytest's temporary directories went with each part's own TMPDIR, see
# run_parts.sh), and, when less than NEED_GB is still free, the torch 2.13
# venv (.venv, rebuilt by the next `make python`).
# Prints what it removed and the free space before and after.
set -u
cd "$(dirname "$0")/.."
NEED_GB=${NEED_GB:-8}

avail_kb() {
    df -k --output=avail . | tail -1 | tr -d ' '
}

echo "disk free before: $(( $(avail_kb) / 1024 )) MB"
for d in build-asan build-fuzz; do
    if [ -e "$d" ]; then
        echo "removing $d"
        rm -rf "$d"
    fi
done
if [ "$(avail_kb)" -lt $(( NEED_GB * 1024 * 1024 )) ] && [ -d .venv ]; then
    echo "less than $NEED_GB GB free: removing .venv (torch 2.13)"
    rm -rf .venv
fi
echo "disk free after: $(( $(avail_kb) / 1024 )) MB"
