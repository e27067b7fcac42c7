#!/usr/bin/env bash
# test_layers.sh - the layer order of docs/design.md holds: no source file
# includes a header from a layer above its own, and the clients of the
# public API (the JIT, the MPI adapter, the store's checks, the tools, the
# Python extension) include no internal header of libccol; inside src/jit and src/comm, the
# folder's own headers are layered too (see jit_headers and comm_headers
# below): a file includes no header above its own, so no two files'
# headers include each other in a circle.
#
# Layers, bottom up: core comm dyn wire trace sync | jit store | tools.
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
    src/mpi | src/jit | store | python/src) echo 6 ;;
    tools | bench) echo 7 ;;
    esac
}

# Folders whose files may include only their own folder's headers, the
# public ones in include/, the benchmarks' and the store's checks (they are
# built on the public API). The benchmarks themselves time internals too.
client() {
    case $1 in src/mpi | src/jit | store | python/src | tools) return 0 ;; esac
    return 1
}

# Resolves a quoted include of a file in `dir` to a path: relative to the
# file, else in one of the build's -I folders; nothing if unknown.
resolve() {
    local dir=$1 name=$2 p
    for p in "$dir/$name" "include/$name" "bench/$name" "src/$name" \
        "store/$name" "tools/$name"; do
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
        if client "$dir" && [ "$tdir" != bench ] && [ "$tdir" != store ]; then
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

for f in src/*/*.[ch] store/*.[ch] tools/*.[ch] bench/*.[ch] \
    python/src/*.[ch]; do
    [ -f "$f" ] || continue
    if [ -z "$(layer "$(dirname "$f")")" ]; then
        echo "FAIL $f: its folder has no place in the layer order"
        fail=$((fail + 1))
        continue
    fi
    check_file "$f"
done

# ---- the layers inside a folder ----

# The headers of a folder, bottom up (docs/design.md): each file has one
# of them as its own (its own_* function below says which); it may include
# its own header and lower ones only, so it can call only what is declared
# at its layer or below, and the files' includes can form no circle (a
# circle would need an include that points up).
jit_headers="ast.h value.h tensor.h jit.h exec.h graph.h guard.h trace_nodes.h
trace_inputs.h trace_ops.h trace_builtins.h tracer.h"
comm_headers="frame.h link.h fault.h shape.h hostplan.h slots.h shm.h shm_link.h
inproc.h tcp.h tcp_link.h oob.h hier.h transport.h tree.h comm.h"

# The header a src/jit file belongs to: itself for a header, x.h for x.c
# when there is one, else the layer listed here.
own_jit() {
    case $1 in
    arena.c | diag.c) echo value.h ;;
    repr.c) echo tensor.h ;;
    lex.c | parse.c | resolve.c | builtins.c | ops.c) echo jit.h ;;
    interp.c | api.c) echo exec.h ;;
    trace.c | session.c) echo tracer.h ;;
    esac
}

# The same for src/comm: the public operations and the environment belong
# to the communicator, each transport's files to its private header.
own_comm() {
    case $1 in
    comm_ops.c | comm_sub.c | env.c) echo comm.h ;;
    tcp.c | tcp_*.c) echo tcp_link.h ;;
    shm.c | shm_*.c) echo shm_link.h ;;
    slots_*.c) echo slots.h ;;
    esac
}

# Checks the files of folder $1 against the order in $2 (bottom up) with
# own_$3 naming the layer of a source file without a header of its name.
check_order() {
    local dir=$1 order=$2 kind=$3 h f own name r=0 n=0
    local -A rank=()
    for h in $order; do
        rank[$h]=$r
        r=$((r + 1))
        if [ ! -f "$dir/$h" ]; then
            echo "FAIL $dir/$h: in the layer order of $dir but not in the tree"
            fail=$((fail + 1))
        fi
    done
    for f in "$dir"/*.[ch]; do
        name=${f#"$dir"/}
        case $name in
        *.h) own=$name ;;
        *) own=$("own_$kind" "$name")
           [ -z "$own" ] && [ -n "${rank[${name%.c}.h]+x}" ] && own=${name%.c}.h ;;
        esac
        if [ -z "$own" ] || [ -z "${rank[$own]+x}" ]; then
            echo "FAIL $f: has no place in the layer order of $dir"
            fail=$((fail + 1))
            continue
        fi
        while IFS= read -r h; do
            # the public headers and core/grow.h are checked above
            case $h in */*) continue ;; esac
            [ -f "$dir/$h" ] || continue
            n=$((n + 1))
            if [ -z "${rank[$h]+x}" ]; then
                echo "FAIL $f: includes $h, which has no place in the" \
                     "layer order of $dir"
                fail=$((fail + 1))
            elif [ "$h" != "$own" ] && [ "${rank[$h]}" -gt "${rank[$own]}" ]; then
                echo "FAIL $f: includes $h, a layer above its own ($own)"
                fail=$((fail + 1))
            fi
        done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
    done
    if [ "$n" -lt 20 ]; then
        echo "FAIL only $n includes of the headers of $dir found"
        fail=$((fail + 1))
    fi
    echo "layers: $n includes of the headers of $dir checked"
}

check_order src/jit "$jit_headers" jit
check_order src/comm "$comm_headers" comm

# The check itself must see the tree: an empty run proves nothing.
if [ "$checked" -lt 100 ]; then
    echo "FAIL only $checked includes found under $root"
    fail=$((fail + 1))
fi
echo "layers: $checked includes checked"
echo "$((fail == 0 ? 1 : 0)) passed, $((fail == 0 ? 0 : 1)) failed"
[ "$fail" -eq 0 ]
