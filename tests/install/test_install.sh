#!/usr/bin/env bash
# test_install.sh - installs the build into temporary prefixes and uses the
# installation as an outside project would: pkg-config files whose paths
# follow the prefix (cmake --install --prefix, DESTDIR staging), a program
# built with `pkg-config --cflags --libs` and one built with
# find_package(ccol CONFIG), both run on 2 ranks with the installed
# `ccol run`; the installed command's --version and --help, and the
# examples under share/ccol. Every command runs under `timeout`.
# Usage: bash test_install.sh PATH-OF-CCOL SOURCE-DIR
set -u
CCOL=${1:?usage: test_install.sh PATH-OF-CCOL SOURCE-DIR}
SRC=$(cd "${2:?usage: test_install.sh PATH-OF-CCOL SOURCE-DIR}" && pwd)
BUILD=$(cd "$(dirname "$CCOL")" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0

ok() { pass=$((pass + 1)); echo "ok $1"; }
bad() {
    fail=$((fail + 1))
    echo "not ok $1"
    printf '%s\n' "$2" | tail -30 | sed 's/^/  /'
}

# A sanitized build installs sanitized libraries: consumers need the
# same flags to link them.
FLAGS=""
if grep -q '^CCOL_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null; then
    FLAGS="-fsanitize=address,undefined"
fi
CC=${CC:-cc}

P=$TMP/prefix
if out=$(timeout 300 cmake --install "$BUILD" --prefix "$P" 2>&1); then
    ok install
else
    bad install "$out"
fi

# The .pc files name the prefix once; every path is relative to it.
PCS=$(ls "$P"/lib*/pkgconfig/*.pc "$P"/lib/*/pkgconfig/*.pc 2>/dev/null)
PCDIR=$(dirname "$(echo "$PCS" | head -1)")
if [ -n "$PCS" ] && [ -f "$PCDIR/ccol.pc" ] && [ -f "$PCDIR/ccol_jit.pc" ] &&
    ! grep -h '^[a-z]*dir=' $PCS | grep -qv '=${prefix}/' &&
    [ "$(grep -h '^prefix=' $PCS | sort -u)" = "prefix=$P" ]; then
    ok pc_relative
else
    bad pc_relative "$(cat $PCS 2>&1)"
fi
export PKG_CONFIG_PATH=$PCDIR
if [ "$(pkg-config --cflags ccol | xargs)" = "-I$P/include" ] &&
    [ "$(pkg-config --variable=libdir ccol)" = "$(dirname "$PCDIR")" ] &&
    pkg-config --exists 'ccol >= 0.1' ccol_jit; then
    ok pc_paths
else
    bad pc_paths "$(pkg-config --cflags --libs ccol ccol_jit 2>&1)"
fi

# A staged install (DESTDIR) keeps the final prefix in the .pc files.
if timeout 300 env DESTDIR="$TMP/stage" cmake --install "$BUILD" \
        --prefix /opt/ccol >/dev/null 2>&1 &&
    grep -qx 'prefix=/opt/ccol' "$TMP"/stage/opt/ccol/lib*/pkgconfig/ccol.pc \
        "$TMP"/stage/opt/ccol/lib/*/pkgconfig/ccol.pc 2>/dev/null; then
    ok destdir
else
    bad destdir "$(cat "$TMP"/stage/opt/ccol/lib*/pkgconfig/ccol.pc 2>&1)"
fi

# run NAME EXE: runs EXE on 2 ranks with the installed launcher; both
# ranks must print their line with the right sum.
run2() {
    local name=$1 exe=$2 want=$3 out
    out=$(cd "$TMP" && LD_LIBRARY_PATH="$(dirname "$PCDIR")" timeout 60 \
        "$P/bin/ccol" run -n 2 -- "$exe" 2>&1)
    if [ $? -eq 0 ] &&
        [ "$(grep -c "rank [01] of 2: sum 3 jit $want\$" <<<"$out")" = 2 ]; then
        ok "$name"
    else
        bad "$name" "$out"
    fi
}

# An outside program built with pkg-config.
if out=$(timeout 120 $CC $FLAGS -DUSE_JIT -o "$TMP/pc_consumer" \
        "$SRC/tests/install/consumer.c" $(pkg-config --cflags --libs ccol_jit) 2>&1)
then
    ok pkgconfig_build
    run2 pkgconfig_run "$TMP/pc_consumer" 42
else
    bad pkgconfig_build "$out"
fi

# An outside program built with CMake: find_package(ccol CONFIG).
if out=$(cd "$TMP" && timeout 300 cmake -S "$SRC/tests/install" -B cm \
        -DCMAKE_PREFIX_PATH="$P" -DCMAKE_C_FLAGS="$FLAGS" 2>&1 &&
    timeout 300 cmake --build cm 2>&1); then
    ok cmake_build
    run2 cmake_run "$TMP/cm/consumer" 0
    run2 cmake_run_jit "$TMP/cm/consumer_jit" 42
    run2 cmake_run_static "$TMP/cm/consumer_static" 0
else
    bad cmake_build "$out"
fi
# The version file refuses a version this is not.
mkdir -p "$TMP/v9"
printf 'cmake_minimum_required(VERSION 3.20)\nproject(v LANGUAGES C)\nfind_package(ccol 9.0 CONFIG REQUIRED)\n' \
    >"$TMP/v9/CMakeLists.txt"
if out=$(timeout 120 cmake -S "$TMP/v9" -B "$TMP/v9/b" \
        -DCMAKE_PREFIX_PATH="$P" 2>&1); then
    bad cmake_version "accepted 9.0: $out"
elif grep -q "version: 0.1.0" <<<"$out"; then
    ok cmake_version
else
    bad cmake_version "$out"
fi

# The installed command: --version, every command's --help, examples.
if timeout 10 "$P/bin/ccol" --version | grep -q "^ccol $(pkg-config --modversion ccol) (protocol"; then
    ok version
else
    bad version "$(timeout 10 "$P/bin/ccol" --version 2>&1)"
fi
for c in run jit dyn report bench demo; do
    if ! timeout 10 "$P/bin/ccol" $c --help 2>&1 | grep -q "usage: ccol $c"; then
        bad "help_$c" "$(timeout 10 "$P/bin/ccol" $c --help 2>&1)"
        continue
    fi
    ok "help_$c"
done
EX=$P/share/ccol/examples
if [ -f "$EX/mlp.tl" ] && out=$(cd "$TMP" && timeout 120 "$P/bin/ccol" jit \
        "$EX/mlp.tl" --schedule "$EX/mlp.json" -n 4 --json --timeout 30) &&
    grep -q '"ok": true' <<<"$out"; then
    ok examples
else
    bad examples "$(ls "$EX" 2>&1) $out"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
