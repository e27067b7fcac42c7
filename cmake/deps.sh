#!/usr/bin/env bash
# deps.sh - makes sure the Debian packages the build needs are installed.
# As root it installs what is missing with apt-get; otherwise it names the
# exact command to run and fails. Usage: cmake/deps.sh [--optional|--fuzz]
#   --optional  also installs what benchmarks use (Open MPI for the MPI
#               baseline); what needs it says so clearly when it is absent.
#   --fuzz      also installs clang and its libFuzzer runtime (make fuzz).
set -u
required="build-essential cmake pkg-config libjansson-dev"
optional="openmpi-bin libopenmpi-dev chromium"
fuzz="clang libclang-rt-14-dev"

missing() {
    local out=""
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
            out="$out $p"
    done
    echo "$out"
}

want="$required"
[ "${1:-}" = "--optional" ] && want="$required $optional"
[ "${1:-}" = "--fuzz" ] && want="$required $fuzz"
need=$(missing $want)
[ -z "$need" ] && exit 0

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "ccol: missing Debian packages:$need" >&2
    echo "ccol: install them with: sudo apt-get install -y$need" >&2
    exit 1
fi
echo "ccol: installing$need" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null 2>&1 || apt-get update
apt-get install -y -qq $need >/dev/null ||
    apt-get install -y $need
still=$(missing $want)
if [ -n "$still" ]; then
    echo "ccol: could not install:$still" >&2
    [ "${1:-}" = "--optional" ] && [ -z "$(missing $required)" ] && exit 0
    exit 1
fi
