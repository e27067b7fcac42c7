#!/usr/bin/env bash
# test_layers.sh - the layer order of docs/design.md holds: no source file
# includes a header from a layer above its own, and the clients of the
# public API (the JIT, the MPI adapter, the tools, the Python extension)
# include no internal header of libccol.
#
# Layers, bottom up: core comm dyn wire trace sync | jit | tools.
# Usage: test_layers.sh CCOL_TOOL SOURCE_DIR (the tool's folder is the
# build's, whose generated/ holds headers made from the tree).
set -u
root=${2:?usage: test_layers.sh CCOL_TOOL SOURCE_DIR}
generated=$(cd "$(dirname "${1:?}")" 2>/dev/null && pwd)/generated
cd "$root" || exit 2

# The layer of a folder (a number; higher is above), or nothing.
layer() {
    case $1 in
    src/core) echo 0 ;; src/comm) echo 1 ;; src/dyn) echo 2 ;;
    src/wire) echo 3 ;; src/trace) echo 4 ;; src/sync) echo 5 ;;
    src/mpi | src/jit | python/src) echo 6 ;;
    tools | bench) echo 7 ;;
    esac
}

# Folders whose files may include only their own folder's headers, the
# public ones in include/ and the benchmarks' (they are built on the public
# API). The benchmarks themselves time internals too.
client() {
    case $1 in src/mpi | src/jit | python/src | tools) return 0 ;; esac
    return 1
}

# Resolves a quoted include of a file in `dir` to a path: relative to the
# file, else in one of the build's -I folders; nothing if unknown.
resolve() {
    local dir=$1 name=$2 p
    for p in "$dir/$name" "include/$name" "bench/$name" "src/$name" \
        "tools/$name"; do
        if [ -f "$p" ]; then
            realpath --relative-to=. "$p"
            return
        fi
    done
}

fail=0 checked=0
check_file() {
    local f=$1 dir name target tdir
    dir=$(dirname "$f")
    while IFS= read -r name; do
        checked=$((checked + 1))
        target=$(resolve "$dir" "$name")
        if [ -z "$target" ] && [ -f "$generated/$name" ]; then
            continue # made by the build from the tree (demo_prog.h)
        fi
        if [ -z "$target" ]; then
            echo "FAIL $f: #include \"$name\" is not in the tree"
            fail=$((fail + 1))
            continue
        fi
        tdir=$(dirname "$target")
        [ "$tdir" = "$dir" ] || [ "$tdir" = include ] && continue
        # core/grow.h is header-only (no symbol to link): every layer may
        # use it.
        [ "$target" = src/core/grow.h ] && continue
        if client "$dir" && [ "$tdir" != bench ]; then
            echo "FAIL $f: includes $target, an internal header of" \
                 "libccol (this folder uses the public API only)"
            fail=$((fail + 1))
        elif [ -z "$(layer "$tdir")" ] ||
             [ "$(layer "$tdir")" -gt "$(layer "$dir")" ]; then
            echo "FAIL $f: includes $target, from a layer above $dir"
            fail=$((fail + 1))
        fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
}

for f in src/*/*.[ch] tools/*.[ch] bench/*.[ch] python/src/*.[ch]; do
    [ -f "$f" ] || continue
    if [ -z "$(layer "$(dirname "$f")")" ]; then
        echo "FAIL $f: its folder has no place in the layer order"
        fail=$((fail + 1))
        continue
    fi
    check_file "$f"
done

# The check itself must see the tree: an empty run proves nothing.
if [ "$checked" -lt 100 ]; then
    echo "FAIL only $checked includes found under $root"
    fail=$((fail + 1))
fi
echo "layers: $checked includes checked"
echo "$((fail == 0 ? 1 : 0)) passed, $((fail == 0 ? 0 : 1)) failed"
[ "$fail" -eq 0 ]
