#!/usr/bin/env bash
# test_report_ctl.sh - `ccol report` never echoes control bytes of a trace:
# a trace whose strings (frames, reasons, labels, messages, sites, event
# names, the lines jansson cannot parse) hold ESC, other C0 control bytes
# and DEL is reported as text and as HTML, and nothing the command writes
# (stdout, stderr, the page) holds a byte below 0x20 other than a newline
# or a tab, or 0x7f: each shows as '?' (tools/report_read.c, scrub()).
# Usage: bash test_report_ctl.sh <path-of-ccol> <source-dir>
set -u

CCOL=${1:?usage: test_report_ctl.sh <path-of-ccol> <source-dir>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ccol-test-report-ctl.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
PASS=0
FAIL=0

ok() { PASS=$((PASS + 1)); echo "ok   $1"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL $1: $2"; }

# The control bytes of each string, as JSON escapes: ESC with a colour
# sequence, BEL, BS, CR, SOH, DEL.
C='\u001b[31mX\u0007\b\r\u0001\u007f'
T=1700000000000000000
# ev DIR RANK FIELDS: appends one line with the common fields.
ev() {
    T=$((T + 1000000))
    printf '{"v":1,"wall_ns":%s,"mono_ns":%s,"rank":%s,"size":2,"pid":%s,"seq":0,%s}\n' \
        "$T" "$T" "$2" "$((100 + $2))" "$3" >>"$1/rank-$2.jsonl"
}

# A trace of two ranks with the control bytes in every kind of string.
write_trace() { # DIR
    local d=$1 r f="f$C (/a/b$C/t.py:3)"
    for r in 0 1; do
        ev "$d" $r "\"event\":\"open\",\"mode\":\"lockstep\",\"collective\":true,\"transport\":\"shm$C\",\"version\":\"0.1$C\""
        ev "$d" $r "\"event\":\"compile_begin\",\"frame\":\"$f\",\"index\":1,\"xseq\":1,\"reason\":\"first$C\",\"user\":\"u$C (/a/u$C.py:1)\""
        ev "$d" $r "\"event\":\"frame\",\"frame\":\"$f\",\"file\":\"/a/$C.py\",\"line\":3"
        ev "$d" $r "\"event\":\"state_change\",\"frame\":\"$f\",\"index\":1,\"source\":\"L$C\",\"before\":\"b$C\",\"after\":\"a$C\""
        ev "$d" $r "\"event\":\"decision\",\"frame\":\"$f\",\"index\":1,\"what\":\"w$C$r\",\"decision\":\"dynamic\",\"explain\":\"ex$C\""
        ev "$d" $r "\"event\":\"exchange\",\"frame\":\"$f\",\"index\":1,\"xseq\":1,\"collective\":true,\"ranks\":2,\"dur_ns\":5,\"ok\":false,\"error\":\"xerr$C\""
        ev "$d" $r "\"event\":\"agree\",\"site\":\"site$C$r\",\"frame\":\"graph$C\",\"aseq\":1,\"ranks\":2,\"dur_ns\":4,\"ok\":false,\"error\":\"aerr$C\""
        ev "$d" $r "\"event\":\"compile_end\",\"frame\":\"$f\",\"index\":1,\"ok\":true,\"dynamic\":[\"dyn$C\"]"
        ev "$d" $r "\"event\":\"recompile\",\"frame\":\"g$C\",\"entries\":1,\"reason\":\"rr$C\""
        ev "$d" $r "\"event\":\"graph_break\",\"frame\":\"g$C\",\"line\":2,\"reason\":\"gb$C\",\"resume\":\"res$C\""
        ev "$d" $r "\"event\":\"eager_fallback\",\"frame\":\"g$C\",\"reason\":\"ef$C\""
        ev "$d" $r "\"event\":\"collective\",\"name\":\"all$C$r\",\"bytes\":1,\"dur_ns\":1"
        ev "$d" $r "\"event\":\"agree\",\"site\":\"out$C\",\"frame\":\"graph 9$C\",\"aseq\":1,\"ranks\":2,\"dur_ns\":4,\"ok\":false,\"error\":\"oerr$C\""
        ev "$d" $r "\"event\":\"once\",\"frame\":\"compile 1 of g$C\",\"outcome\":\"$([ $r = 0 ] && echo failed || echo fallback)\",\"owner\":0,\"key\":\"k$C\",\"dur_ns\":1,\"error\":\"oe$C\""
        ev "$d" $r "\"event\":\"error\",\"code\":\"C$C\",\"message\":\"m$C\",\"frame\":\"g$C\",\"where\":\"exchange\""
        ev "$d" $r "\"event\":\"error\",\"code\":\"KeyboardInterrupt\",\"message\":\"ki$C\",\"frame\":\"g$C\",\"where\":\"compile\",\"during\":\"compile\",\"at\":\"at$C (/x.py:1)\""
        ev "$d" $r "\"event\":\"ev$C\",\"x\":1"
    done
    # Lines jansson refuses, quoting their raw bytes in its message.
    printf '{"v":1,"wall_ns":5,"rank":0,"event":"x","a":"\033[2J"}\n' >>"$d/rank-0.jsonl"
    printf '\033[31m garbage\n\177\n{"v":1,"a":\007}\n' >>"$d/rank-0.jsonl"
}

# ctl_bytes FILE: the number of bytes of FILE below 0x20 (newline and tab
# excepted) or equal to 0x7f.
ctl_bytes() {
    LC_ALL=C tr -d '\t\n\040-\176\200-\377' <"$1" | wc -c
}

# clean NAME FILE: fails NAME when FILE holds a control byte.
clean() {
    local n
    n=$(ctl_bytes "$2")
    [ "$n" = 0 ] && return 0
    bad "$1" "$n control bytes in $(basename "$2"): $(LC_ALL=C grep -an \
        $'[\001-\010\013-\037\177]' "$2" | head -3 | cat -v)"
    return 1
}

test_text() {
    local d=$TMP/t rc
    mkdir -p "$d"
    write_trace "$d"
    timeout -k 5 60 "$CCOL" report "$d" --text >"$TMP/out" 2>"$TMP/err" \
        </dev/null
    rc=$?
    [ $rc = 1 ] || { bad text "exit $rc (want 1: unreadable lines)"; return; }
    clean text "$TMP/out" && clean text "$TMP/err" || return
    # The strings are still shown, their control bytes as '?'.
    grep -qF 'm?[31mX?????' "$TMP/out" && grep -qF "near '?'" "$TMP/err" ||
        { bad text "'?' missing: $(head -c 2000 "$TMP/out")"; return; }
    ok text
}

test_html() {
    local d=$TMP/h
    mkdir -p "$d"
    write_trace "$d"
    timeout -k 5 60 "$CCOL" report "$d" -o "$TMP/r.html" >"$TMP/out" \
        2>"$TMP/err" </dev/null
    [ -s "$TMP/r.html" ] || { bad html "no page written"; return; }
    clean html "$TMP/r.html" && clean html "$TMP/out" &&
        clean html "$TMP/err" || return
    grep -qF 'm?[31mX?????' "$TMP/r.html" ||
        { bad html "'?' missing in the page"; return; }
    ok html
}

test_text
test_html
echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
