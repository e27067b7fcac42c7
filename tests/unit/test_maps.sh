#!/usr/bin/env bash
# test_maps.sh - the maps say what the code does: the transport names
# ccol_comm_transport() can return (the link tables' `name` fields in
# src/comm, and "local" for one rank) are the ones include/ccol.h and
# docs/comm.md's table list, and the protocol version the library reports
# is the one include/ccol.h, docs/comm.md and docs/wire-format.md state.
#
# Usage: test_maps.sh CCOL_TOOL SOURCE_DIR
set -u
tool=${1:?usage: test_maps.sh CCOL_TOOL SOURCE_DIR}
root=${2:?usage: test_maps.sh CCOL_TOOL SOURCE_DIR}
cd "$root" || exit 2
PASS=0
FAIL=0
ok() { PASS=$((PASS + 1)); echo "ok $1"; }
bad() { FAIL=$((FAIL + 1)); echo "not ok $1: $2"; }

# The names in the code: a link table's `.name = "x"` (a designated
# initializer at the start of a line) and CCOL__LINK_OPS(x, ...).
code_names() {
    {
        grep -h '^ *\.name = "[a-z+]*"' src/comm/*.c |
            sed 's/^ *\.name = "\([a-z+]*\)".*/\1/'
        grep -ho 'CCOL__LINK_OPS([a-z]*,' src/comm/*.c |
            sed 's/CCOL__LINK_OPS(\(.*\),/\1/'
        echo local # a communicator of one rank has no link
    } | sort -u
}

# The names the header's comment lists for ccol_comm_transport().
header_names() {
    sed -n '/^\/\* The name of the transport in use/,/\*\//p' include/ccol.h |
        grep -o '"[a-z+]*"' | tr -d '"' | sort -u
}

# The first column of docs/comm.md's transport table.
doc_names() {
    sed -n '/^## Transports/,/^## /p' docs/comm.md |
        grep -o '^| `[a-z+]*` |' | sed 's/^| `\(.*\)` |/\1/' | sort -u
}

test_transport_names() {
    local code
    code=$(code_names)
    [ "$(wc -l <<<"$code")" -ge 6 ] ||
        { bad transport_names "the code scan found only: $code"; return; }
    [ "$code" = "$(header_names)" ] ||
        { bad transport_names "code: $(echo $code); include/ccol.h: \
$(echo $(header_names))"; return; }
    [ "$code" = "$(doc_names)" ] ||
        { bad transport_names "code: $(echo $code); docs/comm.md: \
$(echo $(doc_names))"; return; }
    ok transport_names
}

test_protocol_version() {
    local lib hdr comment comm wire
    lib=$("$tool" --version | sed -n 's/.*(protocol \([0-9]*\)).*/\1/p')
    hdr=$(sed -n 's/^#define CCOL_PROTOCOL_VERSION \([0-9]*\)$/\1/p' \
        include/ccol.h)
    comment=$(grep -B6 '^#define CCOL_PROTOCOL_VERSION' include/ccol.h |
        sed -n 's/.*Version \([0-9]*\):.*/\1/p' | tail -1)
    comm=$(sed -n 's/.*u16 protocol version (\([0-9]*\)).*/\1/p' docs/comm.md)
    wire=$(sed -n 's/.*`CCOL_PROTOCOL_VERSION` (now \([0-9]*\):.*/\1/p' \
        docs/wire-format.md)
    [ -n "$lib" ] && [ "$lib" = "$hdr" ] && [ "$hdr" = "$comment" ] &&
        [ "$hdr" = "$comm" ] && [ "$hdr" = "$wire" ] ||
        { bad protocol_version "library '$lib', ccol.h '$hdr' (its comment \
'$comment'), docs/comm.md '$comm', docs/wire-format.md '$wire'"; return; }
    ok protocol_version
}

# No doc points at a file of the repository that is not there.
test_doc_paths() {
    local missing="" f
    local top='(src|tools|tests|bench|python|include|docs|examples|cmake|shared)'
    for f in $(grep -ohE "\`$top/[A-Za-z0-9_./-]*\`" \
        docs/*.md README.md | tr -d '`' | sort -u); do
        case $f in *'*'* | */) continue ;; esac
        [ -e "$f" ] || missing="$missing $f"
    done
    [ -z "$missing" ] || { bad doc_paths "named but absent:$missing"; return; }
    ok doc_paths
}

test_transport_names
test_protocol_version
test_doc_paths
echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
