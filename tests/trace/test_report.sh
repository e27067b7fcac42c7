#!/usr/bin/env bash
# test_report.sh - tests of `ccol report`: synthetic traces (consistent,
# diverging, crashed, malformed, truncated, empty, 64 ranks, hostile text),
# real traces of multi-rank `ccol jit --trace` runs in each mode (counts
# checked against `ccol jit --json`) and of a pipeline in domains, the HTML structure, and the page
# rendered in headless Chromium (no console errors, non-empty screenshot,
# no sideways scrolling of the page from 1000 to 2000 px wide).
# Usage: bash test_report.sh <path-of-ccol> <source-dir>
set -u

CCOL=${1:?usage: test_report.sh <path-of-ccol> <source-dir>}
SRC=${2:?usage: test_report.sh <path-of-ccol> <source-dir>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ccol-test-report.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
PASS=0
FAIL=0

ok() { PASS=$((PASS + 1)); echo "ok   $1"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL $1: $2"; }
skip() { PASS=$((PASS + 1)); echo "SKIP $1: $2"; }

# report ARGS...: runs `ccol report ARGS`; sets RC, OUT, ERR.
report() {
    timeout -k 5 60 "$CCOL" report "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
    RC=$?
    OUT=$(cat "$TMP/out")
    ERR=$(cat "$TMP/err")
}

# has NAME TEXT PATTERN: fails NAME unless TEXT contains PATTERN (fixed).
has() {
    grep -qF -- "$3" <<<"$2" && return 0
    bad "$1" "missing '$3' in: $2"
    return 1
}

# ---- synthetic trace writer ----
T=1700000000000000000
# ev DIR RANK SIZE FIELDS: appends one line with the common fields.
ev() {
    T=$((T + 1000000))
    printf '{"v":1,"wall_ns":%s,"mono_ns":%s,"rank":%s,"size":%s,"pid":1,"seq":0,%s}\n' \
        "$T" "$T" "$2" "$3" "$4" >>"$1/rank-$2.jsonl"
}

# compile DIR RANK SIZE FRAME INDEX DYN...: a whole compile with an
# exchange, a restart and the given dynamic decisions.
compile() {
    local d=$1 r=$2 s=$3 f=$4 i=$5 w
    shift 5
    ev "$d" "$r" "$s" "\"event\":\"compile_begin\",\"frame\":\"$f\",\"index\":$i,\"reason\":\"first compile\""
    ev "$d" "$r" "$s" "\"event\":\"exchange\",\"frame\":\"$f\",\"index\":$i,\"bytes_sent\":200,\"bytes_recv\":220,\"dur_ns\":400000,\"ok\":true"
    ev "$d" "$r" "$s" "\"event\":\"restart\",\"frame\":\"$f\",\"index\":$i,\"reason\":\"compile collective\""
    for w in "$@"; do
        ev "$d" "$r" "$s" "\"event\":\"decision\",\"frame\":\"$f\",\"index\":$i,\"what\":\"$w\",\"decision\":\"dynamic\",\"explain\":\"$w dynamic: 5 on rank 0, 6 on rank 1\""
    done
    ev "$d" "$r" "$s" "\"event\":\"compile_end\",\"frame\":\"$f\",\"index\":$i,\"ok\":true"
}

guard() { # DIR RANK SIZE FRAME ALL_HIT
    ev "$1" "$2" "$3" "\"event\":\"guard\",\"frame\":\"$4\",\"hit\":$5,\"all_hit\":$5,\"collective\":true,\"dur_ns\":20000"
}

# A consistent job of N ranks: f compiled twice (second time dynamic).
consistent() { # DIR N
    local d=$1 n=$2 r
    mkdir -p "$d"
    for ((r = 0; r < n; r++)); do
        ev "$d" $r $n '"event":"open","mode":"lockstep"'
        compile "$d" $r $n f 1
        guard "$d" $r $n f true
        guard "$d" $r $n f false
        ev "$d" $r $n '"event":"recompile","frame":"f","reason":"L['"'"'x'"'"'].size(0) == 5 failed"'
        compile "$d" $r $n f 2 "L['x'].size(0)"
        ev "$d" $r $n '"event":"close"'
    done
}

test_consistent() {
    consistent "$TMP/ok" 4
    report "$TMP/ok" --text
    [ "$RC" = 0 ] || { bad consistent "exit $RC: $ERR"; return; }
    has consistent "$OUT" "4 ranks traced (world size 4)" || return
    has consistent "$OUT" "no divergence between ranks found" || return
    has consistent "$OUT" "f (compile 2, ok) ranks 0-3: L['x'].size(0)" ||
        return
    has consistent "$OUT" "f (compile 1, ok) ranks 0-3: all static" || return
    has consistent "$OUT" "L['x'].size(0) dynamic: 5 on rank 0, 6 on rank 1" ||
        return
    # rank compiles failed exchanges h/m restarts recompiles ... status
    for r in 0 1 2 3; do
        grep -qE "^ +$r +2 +0 +2 +1/1 +2 +1 +0 +0 +0  ok$" <<<"$OUT" ||
            { bad consistent "summary row of rank $r: $OUT"; return; }
    done
    grep -q WARNING <<<"$OUT" && { bad consistent "warnings: $OUT"; return; }
    report "$TMP/ok" --check -o "$TMP/ok.html"
    [ "$RC" = 0 ] && [ -s "$TMP/ok.html" ] && [ -z "$OUT" ] ||
        { bad consistent "--check -o: rc=$RC out=$OUT err=$ERR"; return; }
    ok consistent
}

# Ranks that diverge in every way the report must catch.
test_diverging() {
    local d=$TMP/div
    mkdir -p "$d"
    for r in 0 1 2; do
        ev "$d" $r 4 '"event":"open","mode":"compile"'
        compile "$d" $r 4 f 1
    done
    compile "$d" 0 4 f 2 "L['x'].size(0)"
    compile "$d" 1 4 f 2 "L['x'].size(0)"
    compile "$d" 2 4 f 2 # rank 2 decided static: diverged decision
    compile "$d" 0 4 g 1
    compile "$d" 1 4 g 1
    ev "$d" 0 4 '"event":"collective","name":"all_reduce","dur_ns":1000'
    ev "$d" 1 4 '"event":"collective","name":"bcast","dur_ns":1000'
    ev "$d" 0 4 '"event":"close"'
    ev "$d" 1 4 '"event":"error","code":"TIMEOUT","message":"rank 2 did not arrive"'
    ev "$d" 1 4 '"event":"close"'
    # rank 2 stops without close; rank 3 never wrote anything.
    report "$d" --text --check
    [ "$RC" = 3 ] || { bad diverging "--check exit $RC (want 3): $OUT"; return; }
    has diverging "$OUT" "WARNING: rank 3 of 4 left no trace events" || return
    has diverging "$OUT" "compile counts differ" || return
    has diverging "$OUT" "ranks 0, 1: 3 compiles; rank 2: 2 compiles" || return
    has diverging "$OUT" "decisions differ for frame f (compile 2): ranks 0, 1: L['x'].size(0); rank 2: all static" || return
    has diverging "$OUT" "collective sequences differ at collective #4: rank 1 ran 'collective bcast' while rank 0 ran 'collective all_reduce'" || return
    has diverging "$OUT" "collective sequences differ: rank 2 ran 2 collectives, rank 0 ran 4" || return
    has diverging "$OUT" "rank 2 stopped early" || return
    has diverging "$OUT" "rank 1 reported 1 error; last: TIMEOUT: rank 2 did not arrive" || return
    has diverging "$OUT" "! f (compile 2, ok) rank 2: all static" || return
    grep -qE '^ +3 +- .* missing$' <<<"$OUT" ||
        { bad diverging "no missing row for rank 3: $OUT"; return; }
    report "$d" -o "$TMP/div.html"
    [ "$RC" = 0 ] || { bad diverging "html exit $RC: $ERR"; return; }
    has diverging "$(cat "$TMP/div.html")" 'class="warn">&#9888; decisions differ for frame f (compile 2)' ||
        return
    ok diverging
}

# Malformed, truncated and empty files: errors name file and line, and the
# rest of the report is still produced.
test_malformed() {
    local d=$TMP/bad
    consistent "$d" 3
    printf 'this is not json\n{"v":2,"rank":1,"event":"x","wall_ns":1}\n' \
        >>"$d/rank-1.jsonl"
    printf '{"v":1,"wall_ns":5,"rank":0,"event":"compile_begin","frame":7,"index":1}\n' \
        >>"$d/rank-1.jsonl"
    printf '{"v":1,"wall_ns":5,"rank":1,"event":"compile_be' >>"$d/rank-2.jsonl"
    : >"$d/rank-3.jsonl"
    report "$d" --text -o "$TMP/bad.html"
    [ "$RC" = 1 ] || { bad malformed "exit $RC (want 1)"; return; }
    has malformed "$ERR" "$d/rank-1.jsonl:15: not a JSON object" || return
    has malformed "$ERR" "$d/rank-1.jsonl:16: unsupported trace version 2" ||
        return
    has malformed "$ERR" "$d/rank-1.jsonl:17: rank 0 does not belong in this file" ||
        return
    has malformed "$ERR" "$d/rank-2.jsonl:15: truncated line" || return
    has malformed "$ERR" "$d/rank-3.jsonl: empty trace file" || return
    has malformed "$OUT" "errors (5):" || return
    has malformed "$OUT" "rank 2 stopped early: its trace ends inside a line" ||
        return
    has malformed "$OUT" "rank 3 of 4 left no trace events" || return
    grep -qE '^ +0 +2 +0 +2 +1/1 ' <<<"$OUT" ||
        { bad malformed "summary lost: $OUT"; return; }
    [ -s "$TMP/bad.html" ] || { bad malformed "no HTML written"; return; }
    has malformed "$(cat "$TMP/bad.html")" "rank-1.jsonl:15: not a JSON object" ||
        return
    # A wrong field type names the field.
    printf '{"v":1,"wall_ns":5,"rank":0,"event":"exchange","frame":"f","index":"one"}\n' \
        >"$TMP/bad/rank-0.jsonl"
    report "$d" --text
    has malformed "$ERR" "rank-0.jsonl:1: exchange: field 'index' must be an integer" ||
        return
    # So does a frame location whose line is not a number.
    printf '{"v":1,"wall_ns":5,"rank":0,"event":"frame","frame":"f","file":"p.tl","line":"9"}\n' \
        >"$TMP/bad/rank-0.jsonl"
    report "$d" --text
    has malformed "$ERR" "rank-0.jsonl:1: frame: field 'line' must be an integer" ||
        return
    # A FIFO named like a trace file is refused, not read (no hang).
    rm -f "$d/rank-3.jsonl"
    mkfifo "$d/rank-3.jsonl"
    report "$d" --text
    has malformed "$ERR" "rank-3.jsonl: not a regular file" || return
    ok malformed
}

test_usage() {
    report
    [ "$RC" = 2 ] || { bad usage "no args: exit $RC"; return; }
    report "$TMP/ok" --bogus
    [ "$RC" = 2 ] || { bad usage "bad option: exit $RC"; return; }
    report "$TMP/nonexistent" --text
    [ "$RC" = 1 ] || { bad usage "missing dir: exit $RC"; return; }
    has usage "$ERR" "$TMP/nonexistent: cannot read the trace directory" ||
        return
    mkdir -p "$TMP/emptydir"
    report "$TMP/emptydir"
    [ "$RC" = 1 ] || { bad usage "empty dir: exit $RC"; return; }
    has usage "$ERR" "no trace files (rank-<r>.jsonl)" || return
    report "$TMP/ok" -o "$TMP/nonexistent/x.html"
    [ "$RC" = 1 ] || { bad usage "unwritable output: exit $RC"; return; }
    has usage "$ERR" "cannot write $TMP/nonexistent/x.html" || return
    ok usage
}

# Hostile text in traces is escaped in the HTML.
test_escaping() {
    local d=$TMP/esc
    mkdir -p "$d"
    ev "$d" 0 1 '"event":"compile_begin","frame":"<script>alert(1)</script>","index":1,"reason":"a\"b&c"'
    ev "$d" 0 1 '"event":"compile_end","frame":"<script>alert(1)</script>","index":1,"ok":false'
    ev "$d" 0 1 '"event":"error","code":"PEER","message":"<img src=x onerror=alert(2)>\u001b[31m"'
    report "$d" -o "$TMP/esc.html" --text
    [ "$RC" = 0 ] || { bad escaping "exit $RC: $ERR"; return; }
    local html
    html=$(cat "$TMP/esc.html")
    grep -qi '<script\|<img' <<<"$html" &&
        { bad escaping "unescaped markup in HTML"; return; }
    has escaping "$html" "&lt;script&gt;alert(1)&lt;/script&gt;" || return
    has escaping "$OUT" "<img src=x onerror=alert(2)>?[31m" || return
    # A source snippet under a message keeps its lines (not '?').
    local d2=$TMP/snip
    mkdir -p "$d2"
    ev "$d2" 0 1 '"event":"error","code":"PROGRAM","message":"p.tl:2:9: error: bad\n    y = x[1]\n        ^"'
    report "$d2" -o "$TMP/snip.html" --text
    grep -qx '        y = x\[1\]' <<<"$OUT" && grep -qx '            ^' <<<"$OUT" ||
        { bad escaping "snippet lines in text: $OUT"; return; }
    grep -q 'error: bad$' "$TMP/snip.html" &&
        grep -qx '    y = x\[1\]' "$TMP/snip.html" ||
        { bad escaping "snippet lines in HTML: $(grep -n 'bad' "$TMP/snip.html")"; return; }
    ok escaping
}

# HTML structure of a report: sections, one timeline row and one summary
# row per rank, nothing fetched.
check_html() { # NAME FILE NRANKS
    local html n
    html=$(cat "$2")
    for want in '<!DOCTYPE html>' 'id="warnings"' 'id="summary"' \
        'id="timeline"' 'id="frames"' '<svg xmlns="http://www.w3.org/2000/svg"' \
        '</svg>' "Content-Security-Policy" '</html>'; do
        has "$1" "$html" "$want" || return 1
    done
    n=$(grep -o '>rank [0-9]*</text>' <<<"$html" | sort -u | wc -l)
    [ "$n" = "$3" ] || { bad "$1" "$n timeline rows, want $3"; return 1; }
    n=$(grep -c '^<tr><td>[0-9]*</td><td class="n">' "$2")
    [ "$n" = "$3" ] || { bad "$1" "$n summary rows, want $3"; return 1; }
    if grep -Eqi '<script|<link rel="stylesheet|src="http|href="http|@import' "$2"; then
        bad "$1" "external resource or script in the HTML"
        return 1
    fi
    return 0
}

test_html_structure() {
    check_html html_structure "$TMP/ok.html" 4 || return
    check_html html_structure "$TMP/div.html" 4 || return
    ok html_structure
}

# Two jobs appended to one directory: the report says so.
test_two_jobs() {
    consistent "$TMP/two" 2
    printf '{"v":1,"wall_ns":%s,"rank":0,"size":2,"pid":77,"event":"open"}\n' \
        "$T" >>"$TMP/two/rank-0.jsonl"
    report "$TMP/two" --text
    [ "$RC" = 0 ] || { bad two_jobs "exit $RC: $ERR"; return; }
    has two_jobs "$OUT" "rank 0's trace holds lines of several processes (pids 1 and 77)" ||
        return
    ok two_jobs
}

test_one_rank() {
    consistent "$TMP/r1" 1
    report "$TMP/r1" --text -o "$TMP/r1.html"
    [ "$RC" = 0 ] || { bad one_rank "exit $RC: $ERR"; return; }
    has one_rank "$OUT" "1 rank traced (world size 1)" || return
    has one_rank "$OUT" "f (compile 2, ok) rank 0: L['x'].size(0)" || return
    has one_rank "$OUT" "no divergence between ranks found" || return
    check_html one_rank "$TMP/r1.html" 1 || return
    ok one_rank
}

test_64_ranks() {
    consistent "$TMP/r64" 64
    report "$TMP/r64" --text -o "$TMP/r64.html"
    [ "$RC" = 0 ] || { bad 64_ranks "exit $RC: $ERR"; return; }
    has 64_ranks "$OUT" "64 ranks traced (world size 64)" || return
    has 64_ranks "$OUT" "f (compile 2, ok) ranks 0-63: L['x'].size(0)" ||
        return
    has 64_ranks "$OUT" "no divergence between ranks found" || return
    check_html 64_ranks "$TMP/r64.html" 64 || return
    ok 64_ranks
}

# ---- real traces from `ccol jit` ----

# Prints "rank compiles exchanges" for each rank of a `ccol jit --json`
# result (python3 reads the JSON).
jit_counts() { # JSON-FILE -> "rank compiles exchanges" lines
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["ranks"]:
    print(r["rank"], r["compiles"], r["exchanges"])
' "$1"
}

# A program with a graph break, called with shapes that change.
write_prog() {
    printf 'def f(x):\n    y = x * 2\n    print("sum", sum(y))\n    return y.sum(0)\n' \
        >"$TMP/prog.tl"
    # A: every rank changes shape at call 2. B: rank 0 does not.
    cat >"$TMP/a.json" <<'EOF'
{"calls": [{"fn": "f", "args": [{"tensor": [4, 3]}]},
           {"fn": "f", "per_rank": [[{"tensor": [5, 3]}], [{"tensor": [6, 3]}],
                                    [{"tensor": [5, 3]}]]}]}
EOF
    cat >"$TMP/b.json" <<'EOF'
{"calls": [{"fn": "f", "args": [{"tensor": [4, 3]}]},
           {"fn": "f", "per_rank": [[{"tensor": [4, 3]}], [{"tensor": [5, 3]}],
                                    [{"tensor": [5, 3]}]]}]}
EOF
}

# jit NAME MODE SCHEDULE DIR: runs 3 ranks with --trace DIR and --json
# into $TMP/jit.json, then the report (text and HTML); sets RC, OUT.
jit() {
    rm -rf "$4"
    timeout -k 5 120 "$CCOL" jit "$TMP/prog.tl" --schedule "$3" -n 3 \
        --collectives "$2" --trace "$4" --timeout 20 --json \
        >"$TMP/jit.json" 2>"$TMP/jit.err" </dev/null ||
        { bad "$1" "$2: ccol jit failed: $(cat "$TMP/jit.err")"; return 1; }
    report "$4" --text -o "$4.html"
    [ "$RC" = 0 ] || { bad "$1" "$2: report exit $RC: $ERR"; return 1; }
    has "$1" "$OUT" "3 ranks traced (world size 3)" || return 1
    # Every rank's compile and exchange counts equal ccol jit's own.
    while read -r r c x; do
        grep -qE "^ +$r +$c +0 +$x +[0-9]+/[0-9]+ .* ok$" <<<"$OUT" ||
            { bad "$1" "$2: rank $r: want $c compiles, $x exchanges: $OUT"
              return 1; }
    done < <(jit_counts "$TMP/jit.json")
    check_html "$1" "$4.html" 3
}

test_real_jit() {
    local mode d
    if ! "$CCOL" jit --help >/dev/null 2>&1; then
        skip real_jit "\`ccol jit\` is not built in this tree"
        return
    fi
    command -v python3 >/dev/null ||
        { skip real_jit "python3 is needed to read ccol jit --json"; return; }
    write_prog
    for mode in off compile lockstep; do
        d=$TMP/jit-$mode
        jit real_jit $mode "$TMP/a.json" "$d" || return
        has real_jit "$OUT" "no divergence between ranks found" || return
        # Paths are shown without the directory the program's files share.
        has real_jit "$OUT" "paths: the user's files relative to $TMP/," ||
            return
        has real_jit "$OUT" "f at prog.tl:1 (compile 2, ok) ranks 0-2: L['x'].size(0)" ||
            return
        # Each frame says where its code is: the def, the print.
        has real_jit "$OUT" "resume_in_f_at_3 at prog.tl:3 (compile 1, ok)" ||
            return
        grep -q "<span class=\"loc\"><span class=\"path\" title=\"$TMP/prog.tl\">prog.tl</span>:3</span>" "$d.html" ||
            { bad real_jit "$mode: the HTML does not show where frames are"; return; }
        grep -q '"event":"graph_break"' "$d/rank-2.jsonl" ||
            { bad real_jit "$mode: no graph_break event"; return; }
        grep -q '"event":"close"' "$d/rank-1.jsonl" ||
            { bad real_jit "$mode: no close event"; return; }
    done
    grep -q '"event":"exchange".*"collective":true' "$TMP/jit-lockstep/rank-1.jsonl" ||
        { bad real_jit "no collective exchange in the lockstep trace"; return; }
    grep -q '"event":"exchange".*"collective":false' "$TMP/jit-off/rank-1.jsonl" ||
        { bad real_jit "off mode traced a collective exchange"; return; }
    # Off mode with rank 0 keeping its shape: ranks recompile at different
    # calls, which the report flags; lockstep makes them agree.
    jit real_jit off "$TMP/b.json" "$TMP/jit-off-b" || return
    has real_jit "$OUT" "WARNING: compile counts differ" || return
    # Warnings come first; why each compile happened is said in the text
    # and as visible text of the HTML (not only in SVG hover titles).
    [ "$(grep -n -m1 '^warnings' <<<"$OUT" | cut -d: -f1)" -lt \
      "$(grep -n -m1 '^summary:' <<<"$OUT" | cut -d: -f1)" ] ||
        { bad real_jit "warnings are not first: $OUT"; return; }
    has real_jit "$OUT" "why: first compile" || return
    has real_jit "$OUT" "why: recompile: guard failed: L['x'].size(0) == 4" ||
        return
    python3 - "$TMP/jit-off-b.html" <<'PYEOF2' ||
import re, sys
html = open(sys.argv[1]).read()
visible = re.sub(r"<title>.*?</title>", "", html, flags=re.S)
assert "recompile: guard failed: L[&#39;x&#39;].size(0) == 4" in visible or \
    "recompile: guard failed: L['x'].size(0) == 4" in visible, "no visible reason"
PYEOF2
        { bad real_jit "the HTML does not show the recompile reason"; return; }
    jit real_jit lockstep "$TMP/b.json" "$TMP/jit-lock-b" || return
    has real_jit "$OUT" "no divergence between ranks found" || return
    has real_jit "$OUT" "f at prog.tl:1 (compile 2, ok) ranks 0-2: L['x'].size(0)" || return
    has real_jit "$OUT" "changed L['x']: tensor size=[4, 3] stride=[S(1), 1] -> tensor size=[?, 3] stride=[S(1), 1]" ||
        return
    has real_jit "$OUT" "L['x'].size(0) dynamic: 4 on rank 0, 5 on rank 1" ||
        return
    ok real_jit
}

# Rank 1 calls another function at call 2: in lockstep mode the compile
# collective fails with DIVERGED on every rank, and the report shows it.
test_real_diverged() {
    local d=$TMP/jit-div
    if ! "$CCOL" jit --help >/dev/null 2>&1; then
        skip real_diverged "\`ccol jit\` is not built in this tree"
        return
    fi
    printf 'def f(x):\n    return x.sum(0)\n\ndef g(x):\n    return x * 3\n' \
        >"$TMP/div.tl"
    cat >"$TMP/div.json" <<'EOF'
{"calls": [{"fn": "f", "args": [{"tensor": [4, 3]}]},
           {"fn": ["f", "g", "f"], "args": [{"tensor": [5, 3]}]}]}
EOF
    timeout -k 5 120 "$CCOL" jit "$TMP/div.tl" --schedule "$TMP/div.json" \
        -n 3 --collectives lockstep --trace "$d" --timeout 10 \
        >/dev/null 2>"$TMP/jit.err" </dev/null
    [ $? != 0 ] || { bad real_diverged "ccol jit succeeded"; return; }
    report "$d" --text
    [ "$RC" = 0 ] || { bad real_diverged "report exit $RC: $ERR"; return; }
    for r in 0 1 2; do
        grep -qE "WARNING: rank $r reported [0-9]+ errors?; last: DIVERGED" <<<"$OUT" ||
            { bad real_diverged "no DIVERGED error of rank $r: $OUT"; return; }
    done
    ok real_diverged
}

# ---- Chromium ----
test_chromium() {
    local b ud log shot html
    b=$(command -v chromium || command -v chromium-browser ||
        command -v google-chrome || true)
    if [ -z "$b" ]; then
        skip chromium "Chromium is not installed (apt-get install chromium)"
        return
    fi
    for html in "$TMP/div.html" "$TMP/r64.html" "$TMP/bad.html"; do
        ud=$(mktemp -d "$TMP/chrome-XXXXXX")
        shot=$ud.png
        log=$ud.log
        timeout -k 5 120 "$b" --headless --no-sandbox --disable-gpu \
            --disable-background-networking --disable-component-update \
            --disable-sync --no-first-run --user-data-dir="$ud" \
            --enable-logging=stderr --v=0 --window-size=1200,1000 \
            --screenshot="$shot" "file://$html" >"$log" 2>&1 </dev/null
        if grep -q ':CONSOLE' "$log"; then
            bad chromium "console messages for $html: $(grep ':CONSOLE' "$log")"
            return
        fi
        # A blank page compresses to a few hundred bytes; a report is larger.
        if [ ! -s "$shot" ] || [ "$(stat -c %s "$shot")" -lt 10000 ] ||
            [ "$(head -c 8 "$shot" | od -An -tx1 | tr -d ' \n')" != 89504e470d0a1a0a ]; then
            bad chromium "no or blank screenshot of $html: $(tail -3 "$log")"
            return
        fi
    done
    ok chromium
}

# The page's width in Chromium at WIDTH px: "none" when nothing makes it
# scroll sideways, else "page W > V". A copy of the page carries a probe
# script (the report's own policy allows no scripts).
overflow_at() {
    local b=$1 html=$2 width=$3 ud probe
    ud=$(mktemp -d "$TMP/chrome-XXXXXX")
    probe=$ud/probe.html
    { sed 's|<meta http-equiv="Content-Security-Policy"[^>]*>||' "$html"
      cat <<'JS'
<script>(function () {
  var d = document.documentElement;
  document.body.setAttribute('data-overflow', d.scrollWidth > d.clientWidth ?
      'page ' + d.scrollWidth + ' > ' + d.clientWidth : 'none');
})();</script>
JS
    } >"$probe"
    timeout -k 5 120 "$b" --headless --no-sandbox --disable-gpu \
        --disable-background-networking --disable-component-update \
        --disable-sync --no-first-run --user-data-dir="$ud" \
        --window-size="$width,1000" --dump-dom "file://$probe" 2>/dev/null \
        </dev/null | grep -o 'data-overflow="[^"]*"' | cut -d'"' -f2
}

# Every report page lays out at 1000, 1400 and 2000 px without the page
# scrolling sideways: wide tables scroll inside themselves, the timeline
# scales. The torch trace has long frame and path names.
test_layout() {
    local b html w got
    b=$(command -v chromium || command -v chromium-browser ||
        command -v google-chrome || true)
    if [ -z "$b" ]; then
        skip layout "Chromium is not installed (apt-get install chromium)"
        return
    fi
    report "$SRC/tests/tools/data/torch" -o "$TMP/torch.html"
    for html in "$TMP/div.html" "$TMP/r64.html" "$TMP/bad.html" \
        "$TMP/torch.html"; do
        for w in 1000 1400 2000; do
            got=$(overflow_at "$b" "$html" "$w")
            if [ "$got" != none ]; then
                bad layout "$(basename "$html") at $w px: ${got:-no answer}"
                return
            fi
        done
    done
    ok layout
}

# A pipeline's stages are domains: the headline lists them, their
# different programs are no divergence, and replicas of one stage that
# recompiled apart (collectives off) are named within their stage only.
test_real_domains() {
    local d=$TMP/pipeline off=$TMP/pipeline-off
    local head="compile counts differ (the ranks recompiled at different times; collectives may not pair up)"
    timeout -k 5 120 "$CCOL" jit "$SRC/examples/pipeline.tl" \
        --schedule "$SRC/examples/pipeline.json" -n 4 --trace "$d" \
        >/dev/null 2>&1 </dev/null
    report "$d"
    has domains_listed "$OUT" "(domains: ranks 0, 1 | ranks 2, 3)" &&
        has domains_agree "$OUT" "no divergence between ranks found" &&
        ok domains_agree
    timeout -k 5 120 "$CCOL" jit "$SRC/examples/pipeline.tl" \
        --schedule "$SRC/examples/pipeline.json" -n 4 --trace "$off" \
        --collectives off >/dev/null 2>&1 </dev/null
    report "$off"
    if has domains_off "$OUT" "$head: rank 0: 1 compile; rank 1: 2 compiles" &&
        has domains_off "$OUT" "$head: rank 2: 2 compiles; rank 3: 1 compile" &&
        ! grep -q "collective sequences differ\|ranks 0, 3" <<<"$OUT"; then
        ok domains_replicas_named
    else
        bad domains_replicas_named "stages compared with each other: $OUT"
    fi
}

test_consistent
test_diverging
test_malformed
test_usage
test_escaping
test_html_structure
test_two_jobs
test_one_rank
test_64_ranks
test_real_jit
test_real_diverged
test_real_domains
test_chromium
test_layout
echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
