#!/usr/bin/env bash
# test_layers.sh - the layer order of docs/design.md holds: no source file
# includes a header from a layer above its own, and the clients of the
# public API (the JIT, the MPI adapter, the tools, the Python extension)
# include no internal header of libccol; inside src/jit, the JIT's own
# headers are layered too (see jit_headers below): a file includes no
# header above its own, so no two files' headers include each other in a
# circle.
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

# ---- the JIT's layers (docs/design.md, "The JIT's layers") ----

# The headers of src/jit, bottom up. Each file has one of them as its own
# (jit_own); it may include its own header and lower ones only, so it can
# call only what is declared at its layer or below.
jit_headers="ast.h value.h tensor.h jit.h exec.h graph.h guard.h trace_nodes.h
trace_inputs.h trace_ops.h trace_builtins.h tracer.h"

declare -A jit_rank=()
r=0
for h in $jit_headers; do
    jit_rank[$h]=$r
    r=$((r + 1))
    if [ ! -f "src/jit/$h" ]; then
        echo "FAIL src/jit/$h: in the JIT's layer order but not in the tree"
        fail=$((fail + 1))
    fi
done

# The header a src/jit file belongs to: itself for a header, x.h for x.c
# when there is one, else the layer listed here; nothing if unplaced.
jit_own() {
    local f=${1#src/jit/} base
    case $f in
    *.h) echo "$f"; return ;;
    arena.c | diag.c) echo value.h; return ;;
    repr.c) echo tensor.h; return ;;
    lex.c | parse.c | resolve.c | builtins.c | ops.c)
        echo jit.h; return ;;
    interp.c | api.c) echo exec.h; return ;;
    trace.c | session.c) echo tracer.h; return ;;
    esac
    base=${f%.c}.h
    [ -n "${jit_rank[$base]+x}" ] && echo "$base"
}

# Every include points at its own layer or below, so the files' includes
# can form no circle: a circle would need an include that points up.
jit_checked=0
for f in src/jit/*.[ch]; do
    own=$(jit_own "$f")
    if [ -z "$own" ] || [ -z "${jit_rank[$own]+x}" ]; then
        echo "FAIL $f: has no place in the JIT's layer order"
        fail=$((fail + 1))
        continue
    fi
    while IFS= read -r name; do
        # the public headers and core/grow.h are checked above
        case $name in */*) continue ;; esac
        [ -f "src/jit/$name" ] || continue
        jit_checked=$((jit_checked + 1))
        if [ -z "${jit_rank[$name]+x}" ]; then
            echo "FAIL $f: includes $name, which has no place in the" \
                 "JIT's layer order"
            fail=$((fail + 1))
            continue
        fi
        [ "$name" = "$own" ] && continue
        if [ "${jit_rank[$name]}" -gt "${jit_rank[$own]}" ]; then
            echo "FAIL $f: includes $name, a layer above its own ($own)"
            fail=$((fail + 1))
        fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done

if [ "$jit_checked" -lt 20 ]; then
    echo "FAIL only $jit_checked includes of the JIT's headers found"
    fail=$((fail + 1))
fi
echo "layers: $jit_checked includes of the JIT's headers checked"

# The check itself must see the tree: an empty run proves nothing.
if [ "$checked" -lt 100 ]; then
    echo "FAIL only $checked includes found under $root"
    fail=$((fail + 1))
fi
echo "layers: $checked includes checked"
echo "$((fail == 0 ? 1 : 0)) passed, $((fail == 0 ? 0 : 1)) failed"
[ "$fail" -eq 0 ]
