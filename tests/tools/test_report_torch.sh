#!/usr/bin/env bash
# test_report_torch.sh - `ccol report` on torch jobs, in --text and HTML:
# frames of torch, ccol and the standard library folded under the user
# frame that reached them, paths shortened to what differs (full paths in
# tooltips), the reason each rank compiled where ranks differ, and where
# an interrupt (Ctrl-C) landed. The recorded 2-rank trace in
# data/torch/ was written by data/make_torch_trace.py (see there); the
# other traces are written here, as older ccol.torch versions wrote them.
# Usage: bash test_report_torch.sh <path-of-ccol> <source-dir>
set -u

CCOL=${1:?usage: test_report_torch.sh <path-of-ccol> <source-dir>}
SRC=${2:?usage: test_report_torch.sh <path-of-ccol> <source-dir>}
DATA=$SRC/tests/tools/data/torch
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ccol-test-report-torch.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
PASS=0
FAIL=0

ok() { PASS=$((PASS + 1)); echo "ok   $1"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL $1: $2"; }

# report ARGS...: runs `ccol report ARGS`; sets RC and OUT.
report() {
    timeout -k 5 60 "$CCOL" report "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
    RC=$?
    OUT=$(cat "$TMP/out")
}

# has NAME TEXT PATTERN: fails NAME unless TEXT contains PATTERN (fixed).
has() {
    grep -qF -- "$3" <<<"$2" && return 0
    bad "$1" "missing '$3' in: ${2:0:400}"
    return 1
}

# hasnt NAME TEXT PATTERN: fails NAME if TEXT contains PATTERN (fixed).
hasnt() {
    grep -qF -- "$3" <<<"$2" || return 0
    bad "$1" "unexpected '$3' in: $(grep -F -- "$3" <<<"$2" | head -3)"
    return 1
}

# after NAME TEXT FIRST NEXT: fails NAME unless a line holding FIRST is
# directly followed by a line holding NEXT.
after() {
    awk -v a="$3" -v b="$4" 'index(prev, a) && index($0, b) { f = 1 }
        { prev = $0 } END { exit !f }' <<<"$2" && return 0
    bad "$1" "no line with '$3' followed by one with '$4' in: ${2:0:400}"
    return 1
}

# ---- the recorded torch trace ----

test_frames_text() {
    report "$DATA" --text
    # torch's `inner` wrapper is listed under step(), never as a user frame
    # (two spaces in: a user frame; four: a frame it reached).
    if grep -qE '^  (! )?inner ' <<<"$OUT"; then
        bad frames_text "inner listed as a user frame: $OUT"
        return
    fi
    after frames_text "$OUT" "  step (make_torch_trace.py:36) called into:" \
        "    inner (torch/_dynamo/external_utils.py:67) (compile 1, ok) ranks 0, 1" &&
        has frames_text "$OUT" "    inner (torch/_dynamo/external_utils.py:67) (compile 2, ok)" &&
        has frames_text "$OUT" "  loss (make_torch_trace.py:56) (compile 1, failed) ranks 0, 1" &&
        ok frames_text
}

test_paths_text() {
    report "$DATA" --text
    has paths_text "$OUT" "paths: the user's files relative to /work/main/tests/tools/data/" &&
        hasnt paths_text "$OUT" "site-packages" &&
        hasnt paths_text "$OUT" "/work/main/tests/tools/data/make_torch_trace.py" &&
        has paths_text "$OUT" "(in Inductor at _run_compile_cmd (torch/_inductor/cpp_builder.py:696))" &&
        ok paths_text
}

test_reasons_text() {
    report "$DATA" --text
    after reasons_text "$OUT" \
        "why: rank 0: recompile: guard failed: 0/0: tensor 'args[0]' requires_grad mismatch" \
        "why: rank 1: recompile: guard failed: 0/0: tensor 'args[0]' size mismatch at index 0. expected 3, actual 5" &&
        has reasons_text "$OUT" "        why: first compile" &&
        hasnt reasons_text "$OUT" "why: ranks 0, 1: first compile" &&
        ok reasons_text
}

test_interrupt_text() {
    report "$DATA" --text
    has interrupt_text "$OUT" "WARNING: ranks 0, 1 were interrupted (Ctrl-C) during compile 1 of loss (make_torch_trace.py:56), outside any collective (in Inductor at" &&
        hasnt interrupt_text "$OUT" "in a collective" &&
        hasnt interrupt_text "$OUT" "reported 2 errors" &&
        grep -qE '^ +0 .* interrupted$' <<<"$OUT" &&
        ok interrupt_text || bad interrupt_text "status: $OUT"
}

test_html() {
    local h
    report "$DATA" -o "$TMP/r.html"
    h=$(cat "$TMP/r.html")
    has html "$h" '<tr class="user"><td colspan="9"><code>step (<span class="path" title="/work/main/tests/tools/data/make_torch_trace.py">make_torch_trace.py</span>:36)</code> called into:</td></tr>' &&
        after html "$h" 'called into:</td></tr>' \
            '<tr class="internal"><td><code>inner (<span class="path" title="/work/main/.venv/lib/python3.11/site-packages/torch/_dynamo/external_utils.py">torch/_dynamo/external_utils.py</span>:67)</code>' &&
        hasnt html "$h" '<tr class="frame"><td><code>inner' &&
        has html "$h" "<b>rank 0:</b> recompile: guard failed: 0/0: tensor &#39;args[0]&#39; requires_grad mismatch" &&
        has html "$h" "<b>rank 1:</b> recompile: guard failed: 0/0: tensor &#39;args[0]&#39; size mismatch" &&
        has html "$h" 'ranks 0, 1 were interrupted (Ctrl-C) during compile 1 of loss (<span class="path" title="/work/main/tests/tools/data/make_torch_trace.py">make_torch_trace.py</span>:56), outside any collective (in Inductor at' &&
        hasnt html "$h" "in a collective" &&
        hasnt html "$h" "overflow-wrap:anywhere" &&
        has html "$h" "overflow-wrap:break-word" &&
        ok html
}

# The page in headless Chromium: the frames column is wide enough for the
# shortened path on one line (a column squeezed to one character per line
# is as narrow as the widest character, under 20 px).
test_chromium() {
    local b
    b=$(command -v chromium || command -v chromium-browser ||
        command -v google-chrome || true)
    if [ -z "$b" ]; then
        PASS=$((PASS + 1))
        echo "SKIP chromium: Chromium is not installed"
        return
    fi
    report "$DATA" -o "$TMP/r.html"
    timeout -k 5 60 "$b" --headless --no-sandbox --disable-gpu \
        --user-data-dir="$TMP/chrome" --window-size=700,1600 \
        --dump-dom "file://$TMP/r.html" >"$TMP/dom" 2>/dev/null
    if ! grep -q "called into" "$TMP/dom"; then
        bad chromium "no page rendered"
        return
    fi
    timeout -k 5 60 "$b" --headless --no-sandbox --disable-gpu \
        --user-data-dir="$TMP/chrome" --window-size=700,1600 \
        --screenshot="$TMP/r.png" "file://$TMP/r.html" >/dev/null 2>&1
    if [ -s "$TMP/r.png" ]; then ok chromium; else bad chromium "no screenshot"; fi
}

# ---- hand-written traces (as older ccol.torch versions wrote them) ----

T=1700000000000000000
ev() { # DIR RANK FIELDS
    T=$((T + 1000000))
    printf '{"v":1,"wall_ns":%s,"mono_ns":%s,"rank":%s,"size":2,"pid":%s,"seq":0,%s}\n' \
        "$T" "$T" "$2" "$((100 + $2))" "$3" >>"$1/rank-$2.jsonl"
}

F='f (/home/u/proj/train.py:12)'
W='inner (/usr/lib/python3/dist-packages/torch/_dynamo/external_utils.py:67)'

# begin DIR RANK FRAME INDEX: a compile's begin and its exchange.
begin() {
    ev "$1" "$2" "\"event\":\"compile_begin\",\"frame\":\"$3\",\"index\":$4,\"reason\":\"first compile\""
    ev "$1" "$2" "\"event\":\"exchange\",\"frame\":\"$3\",\"index\":$4,\"collective\":true,\"ranks\":2,\"dur_ns\":1000,\"ok\":true"
}

# Ctrl-C inside Inductor, written before ccol.torch said where: the error
# of the compile says "exchange", the one at exit "in a collective".
test_interrupt_compile() {
    local d=$TMP/int_compile r
    mkdir -p "$d"
    for r in 0 1; do
        ev "$d" $r '"event":"open","mode":"lockstep"'
        begin "$d" $r "$F" 1
        ev "$d" $r "\"event\":\"agree\",\"site\":\"graph.hash\",\"frame\":\"graph 0/0 of $F (compile 1)\",\"aseq\":1,\"dur_ns\":1000,\"ok\":true"
        ev "$d" $r "\"event\":\"error\",\"code\":\"KeyboardInterrupt\",\"message\":\"\",\"frame\":\"$F\",\"where\":\"exchange\""
        ev "$d" $r "\"event\":\"compile_end\",\"frame\":\"$F\",\"index\":1,\"ok\":false"
        ev "$d" $r '"event":"error","code":"INTERRUPTED","message":"ccol.torch: this rank was interrupted (Ctrl-C) in a collective; its communicator is closed","frame":"","where":"job"'
    done
    report "$d" --text
    has interrupt_compile "$OUT" "WARNING: ranks 0, 1 were interrupted (Ctrl-C) during compile 1 of f (train.py:12), outside any collective" &&
        hasnt interrupt_compile "$OUT" "in a collective" &&
        report "$d" -o "$TMP/ic.html" &&
        has interrupt_compile "$(cat "$TMP/ic.html")" 'interrupted (Ctrl-C) during compile 1 of f (<span class="path" title="/home/u/proj/train.py">train.py</span>:12), outside any collective' &&
        ok interrupt_compile
}

# Ctrl-C in a compile exchange on rank 0; rank 1 in its own code, after
# its compile ended; both traces without `during`.
test_interrupt_elsewhere() {
    local d=$TMP/int_other
    mkdir -p "$d"
    ev "$d" 0 '"event":"open","mode":"lockstep"'
    ev "$d" 0 "\"event\":\"compile_begin\",\"frame\":\"$F\",\"index\":1,\"reason\":\"first compile\""
    ev "$d" 0 "\"event\":\"exchange\",\"frame\":\"$F\",\"index\":1,\"collective\":true,\"dur_ns\":1000,\"ok\":false,\"error\":\"\""
    ev "$d" 0 "\"event\":\"error\",\"code\":\"KeyboardInterrupt\",\"message\":\"\",\"frame\":\"$F\",\"where\":\"exchange\""
    ev "$d" 0 "\"event\":\"compile_end\",\"frame\":\"$F\",\"index\":1,\"ok\":false"
    ev "$d" 1 '"event":"open","mode":"lockstep"'
    begin "$d" 1 "$F" 1
    ev "$d" 1 "\"event\":\"compile_end\",\"frame\":\"$F\",\"index\":1,\"ok\":true"
    ev "$d" 1 '"event":"error","code":"INTERRUPTED","message":"x","frame":"","where":"job"'
    report "$d" --text
    has interrupt_elsewhere "$OUT" "rank 0 was interrupted (Ctrl-C) in a collective: the exchange for compile 1 of f (train.py:12)" &&
        has interrupt_elsewhere "$OUT" "rank 1 was interrupted (Ctrl-C) in the user's code, outside any compile" &&
        ok interrupt_elsewhere
}

# A trace without `user`: torch's frame (by its path) under a user frame
# the trace does not name; the user's own frame stays a user frame, also
# in a directory named torch.
test_no_user_field() {
    local d=$TMP/nouser r
    mkdir -p "$d"
    for r in 0 1; do
        begin "$d" $r "$W" 1
        ev "$d" $r "\"event\":\"compile_end\",\"frame\":\"$W\",\"index\":1,\"ok\":true"
        begin "$d" $r "g (/home/u/proj/torch/train.py:3)" 1
        ev "$d" $r "\"event\":\"compile_end\",\"frame\":\"g (/home/u/proj/torch/train.py:3)\",\"index\":1,\"ok\":true"
        begin "$d" $r "$F" 1
        ev "$d" $r "\"event\":\"compile_end\",\"frame\":\"$F\",\"index\":1,\"ok\":true"
    done
    report "$d" --text
    after no_user_field "$OUT" "  (a user frame the trace does not name) called into:" \
        "    inner (torch/_dynamo/external_utils.py:67) (compile 1, ok)" &&
        has no_user_field "$OUT" "  g (torch/train.py:3) (compile 1, ok)" &&
        has no_user_field "$OUT" "  f (train.py:12) (compile 1, ok)" &&
        has no_user_field "$OUT" "paths: the user's files relative to /home/u/proj/" &&
        ok no_user_field
}

# A guard of a call only rank 0 makes (collective false) answers for that
# rank alone; the shared call's guard collective for every rank.
test_alone_guard() {
    local d=$TMP/alone r h
    mkdir -p "$d"
    for r in 0 1; do
        ev "$d" $r '"event":"open","mode":"lockstep"'
        begin "$d" $r "$F" 1
        ev "$d" $r "\"event\":\"compile_end\",\"frame\":\"$F\",\"index\":1,\"ok\":true"
        ev "$d" $r '"event":"guard","frame":"train (/home/u/proj/train.py:40)","hit":true,"all_hit":true,"collective":true,"dur_ns":1000,"ok":true'
    done
    ev "$d" 0 '"event":"guard","frame":"evaluate (/home/u/proj/train.py:52)","hit":false,"all_hit":false,"collective":false,"dur_ns":0,"ok":true'
    report "$d" -o "$TMP/alone.html"
    h=$(cat "$TMP/alone.html")
    has alone_guard "$h" "miss here, recompile on this rank alone" &&
        has alone_guard "$h" "hit here, all ranks hit" &&
        hasnt alone_guard "$h" "recompile on every rank" &&
        ok alone_guard
}

# A job that hung in a guard collective: rank 1's trace ends in a wait
# (its progress lines), rank 0's in its own code; a wait that ended (any
# event after it) is not reported.
test_unfinished_wait() {
    local d=$TMP/wait r
    local what='in guard collective at train (/home/u/proj/train.py:40)'
    mkdir -p "$d"
    for r in 0 1; do
        ev "$d" $r '"event":"open","mode":"lockstep"'
        begin "$d" $r "$F" 1
        ev "$d" $r "\"event\":\"compile_end\",\"frame\":\"$F\",\"index\":1,\"ok\":true"
    done
    ev "$d" 0 "\"event\":\"wait\",\"what\":\"$what\",\"awaited\":\"rank 1 is compiling g\",\"waited_s\":10"
    ev "$d" 0 '"event":"guard","frame":"train (/home/u/proj/train.py:40)","hit":true,"all_hit":true,"collective":true,"dur_ns":1000,"ok":true'
    ev "$d" 1 "\"event\":\"wait\",\"what\":\"$what\",\"awaited\":\"rank 0 is running (not compiling), in torch.distributed waiting on rank 1, waited 20 s of 1800 s\",\"waited_s\":20"
    ev "$d" 1 "\"event\":\"wait\",\"what\":\"$what\",\"awaited\":\"rank 0 is running (not compiling), in torch.distributed waiting on rank 1, waited 40 s of 1800 s\",\"waited_s\":40"
    report "$d" --text
    has unfinished_wait "$OUT" "WARNING: rank 1's trace ends in an unfinished wait: in guard collective at train (train.py:40): rank 0 is running (not compiling), in torch.distributed waiting on rank 1, waited 40 s of 1800 s" &&
        hasnt unfinished_wait "$OUT" "rank 0's trace ends in an unfinished wait" &&
        has unfinished_wait "$(grep -E '^ +1 ' <<<"$OUT")" " waiting" &&
        ok unfinished_wait
}

test_frames_text
test_paths_text
test_reasons_text
test_interrupt_text
test_html
test_chromium
test_interrupt_compile
test_interrupt_elsewhere
test_no_user_field
test_alone_guard
test_unfinished_wait

echo "test_report_torch: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
