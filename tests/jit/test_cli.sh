#!/usr/bin/env bash
# test_cli.sh - `ccol jit` end to end (docs/design.md, docs/cli.md): golden
# job summaries of the scenarios of the reference JIT at 2 and 3 ranks in
# every mode, the same results in every mode, --check on every example,
# malformed schedules and command lines (each message), program errors, a
# rank calling a missing function, ranks killed or stalled mid-schedule (the
# summary still comes out, naming them), ranks dying with a SIGKILLed
# launcher, joining a job started by hand,
# readable output, --explain and --trace. Every command runs under `timeout`.
# Usage: bash test_cli.sh PATH-OF-CCOL SOURCE-DIR
set -u
CCOL=${1:?usage: test_cli.sh PATH-OF-CCOL SOURCE-DIR}
SRC=$(cd "${2:?usage: test_cli.sh PATH-OF-CCOL SOURCE-DIR}" && pwd)
G=$SRC/tests/jit/golden
EX=$SRC/examples
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/cli_lib.sh"

# The checker: `match` compares a summary with an expectation (keys of
# the expectation only; "message_has" lists substrings of "message").
cat >"$TMP/lib.py" <<'EOF'
import json, sys

def match(exp, got, path="job"):
    if isinstance(exp, dict):
        if not isinstance(got, dict):
            raise AssertionError(f"{path}: expected an object, got {got!r}")
        for k, v in exp.items():
            if k == "message_has":
                for s in v:
                    if s not in got.get("message", ""):
                        raise AssertionError(f"{path}.message lacks {s!r}: "
                                             f"{got.get('message')!r}")
                continue
            if k not in got:
                raise AssertionError(f"{path}: no key {k!r}")
            match(v, got[k], f"{path}.{k}")
    elif isinstance(exp, list):
        if not isinstance(got, list) or len(got) != len(exp):
            raise AssertionError(f"{path}: expected {exp!r}, got {got!r}")
        for i, (e, g) in enumerate(zip(exp, got)):
            match(e, g, f"{path}[{i}]")
    elif exp != got or type(exp) != type(got):
        raise AssertionError(f"{path}: expected {exp!r}, got {got!r}")

KEYS = ["rank", "ok", "error", "compiles", "exchanges", "frames", "results"]

def load(path):
    text = open(path).read()
    lines = text.splitlines()
    if len(lines) != 1:
        raise AssertionError(f"stdout has {len(lines)} lines, not one")
    j = json.loads(text)
    if list(j) != ["ok", "world_size", "mode", "ranks"]:
        raise AssertionError(f"job keys {list(j)}")
    for r, e in enumerate(j["ranks"]):
        keys = KEYS if "domain" not in e else KEYS[:1] + ["domain"] + KEYS[1:]
        if list(e) != keys or e["rank"] != r:
            raise AssertionError(f"rank entry {r} keys {list(e)}")
        for f in e["frames"]:
            if f["dynamic"] != sorted(f["dynamic"]):
                raise AssertionError(f"unsorted dynamic {f['dynamic']}")
    return j
EOF

# pycheck NAME CODE: runs python CODE with `j` the JSON job on stdout and
# `rc` the exit status; an assertion failing fails the test.
pycheck() {
    local name=$1 code=$2 msg
    if msg=$(cd "$TMP" && python3 -S - "$TMP/out" "$RC" 2>&1 <<EOF
import sys
from lib import *
rc = int(sys.argv[2])
j = load(sys.argv[1])
$code
EOF
    ); then
        ok "$name"
    else
        bad "$name" "$msg
$(details)"
    fi
}

# golden NAME N MODE: the scenario's summary matches NAME.expect.json,
# the exit status is 0 iff it expects ok, and the results are kept.
golden() {
    local name=$1 n=$2 mode=$3
    jit "$G/step.tl" --schedule "$G/$name.$n.json" -n "$n" \
        --collectives "$mode" --json --timeout 5
    cp "$TMP/out" "$TMP/res.$name.$n.$mode"
    pycheck "golden_${name}_${n}_$mode" "
exp = json.load(open('$G/$name.expect.json'))['$n']['$mode']
assert (j['world_size'], j['mode']) == ($n, '$mode'), j['mode']
match(exp, j)
assert (rc == 0) == exp['ok'], f'exit status {rc}'
for e in j['ranks']:
    assert e['ok'] == (e['error'] is None)
    if e['ok']:
        calls = json.load(open('$G/$name.$n.json'))['calls']
        assert len(e['results']) == len(calls)"
}

for n in 2 3; do
    for name in same skew late late_local divergent marks breaks missing \
        lists; do
        for mode in off compile lockstep; do
            golden "$name" "$n" "$mode"
        done
    done
    # Where every mode succeeds, every mode computes the same results.
    for name in same skew marks lists; do
        RC=0
        cp "$TMP/res.$name.$n.lockstep" "$TMP/out"
        pycheck "same_results_${name}_$n" "
others = [load('$TMP/res.$name.$n.' + m) for m in ('off', 'compile')]
for o in others:
    for a, b in zip(j['ranks'], o['ranks']):
        assert a['results'] == b['results'], (a['results'], b['results'])"
    done
done

# The recompile limit: a dim marked static that changes at every call.
jit "$G/step.tl" --schedule "$G/limit.json" -n 2 --recompile-limit 2 --json \
    --timeout 5
pycheck recompile_limit "
assert rc == 0 and j['ok']
for e in j['ranks']:
    assert e['frames'] == [{'name': 'local', 'compiles': 2, 'dynamic': [],
                            'eager': True}], e['frames']
    assert len(e['results']) == 5"

# Its warning names the rank once: no "[rank 0] warning: rank 0: ...".
if grep -q "^\[rank 0\] warning: frame local: recompile_limit (2) reached" \
    "$TMP/err" && ! grep -q "warning: rank" "$TMP/err"; then
    ok recompile_limit_warning
else
    bad recompile_limit_warning "$(details)"
fi

# --check on every example that has a schedule, with its number of ranks.
for sched in "$EX"/*.json; do
    prog=${sched%.json}.tl
    name=$(basename "$sched" .json)
    n=$(python3 -c "
import json, sys
calls = json.load(open(sys.argv[1]))['calls']
print(max([len(c.get('per_rank', [])) for c in calls] +
          [len(c['fn']) for c in calls if isinstance(c['fn'], list)] + [2]))" "$sched")
    jit "$prog" --schedule "$sched" -n "$n" --check --json --timeout 10
    pycheck "check_example_${name}_$n" "
assert rc == 0 and j['ok'], [e['error'] for e in j['ranks']]
assert j['world_size'] == $n"
done

# The demo's job (4 ranks) in each mode: lockstep agrees, off does not.
jit "$EX/mlp.tl" --schedule "$EX/mlp.json" -n 4 --collectives off --json \
    --timeout 10
pycheck mlp_off_diverges "
assert rc == 0
assert [e['compiles'] for e in j['ranks']] == [1, 2, 2, 2]
dyn = [e['frames'][0]['dynamic'] for e in j['ranks']]
assert dyn[0] == [] and dyn[1] == [\"L['x'].size(0)\"], dyn"
jit "$EX/mlp.tl" --schedule "$EX/mlp.json" -n 4 --collectives lockstep \
    --json --timeout 10
pycheck mlp_lockstep_agrees "
assert rc == 0
assert [e['compiles'] for e in j['ranks']] == [2, 2, 2, 2]
for e in j['ranks']:
    assert e['frames'][0]['dynamic'] == [\"L['x'].size(0)\"], e"

# A pipeline: each stage is a domain of the schedule, its replicas compile
# together (both recompile at the call where one replica's length
# changes) and agree among themselves while the other stage runs another
# program; without the domains the two programs cannot pair up.
jit "$EX/pipeline.tl" --schedule "$EX/pipeline.json" -n 4 --json --timeout 10
pycheck pipeline_stages_agree_apart "
assert rc == 0 and j['ok'], [e['error'] for e in j['ranks']]
assert [e['domain'] for e in j['ranks']] == [0, 0, 1, 1]
assert [e['compiles'] for e in j['ranks']] == [2, 2, 2, 2]
assert [e['exchanges'] for e in j['ranks']] == [2, 2, 2, 2]
names = [e['frames'][0]['name'] for e in j['ranks']]
assert names == ['stage0', 'stage0', 'stage1', 'stage1'], names
dyn = [e['frames'][0]['dynamic'] for e in j['ranks']]
assert dyn == [[\"L['x'].size(0)\"]] * 2 + [[\"L['h'].size(0)\"]] * 2, dyn"
python3 -c "import json, sys; d = json.load(open(sys.argv[1])); \
del d['domains']; json.dump(d, open(sys.argv[2], 'w'))" \
    "$EX/pipeline.json" "$TMP/one_domain.json"
jit "$EX/pipeline.tl" --schedule "$TMP/one_domain.json" -n 4 --json \
    --timeout 10
pycheck pipeline_without_domains_diverges "
assert rc == 1 and not j['ok']
codes = {e['error']['code'] for e in j['ranks'] if e['error']}
assert codes == {'DIVERGED'}, codes"

# expect_err NAME RC NEEDLE ARGS...: exit status RC, NEEDLE on stderr,
# nothing on stdout.
expect_err() {
    local name=$1 want=$2 needle=$3
    shift 3
    jit "$@"
    if [ "$RC" -eq "$want" ] && grep -qF -- "$needle" "$TMP/err" &&
        [ ! -s "$TMP/out" ]; then
        ok "$name"
    else
        bad "$name" "want rc=$want and stderr containing: $needle
$(details)"
    fi
}

P=$G/step.tl
S=$G/same.2.json
expect_err usage_no_args 2 "missing the program"
expect_err usage_no_schedule 2 "missing --schedule" "$P"
expect_err usage_bad_n 2 "-n must be a number of ranks" "$P" --schedule "$S" -n 0
expect_err usage_n_word 2 "-n must be a number of ranks" "$P" --schedule "$S" -n two
expect_err usage_mode 2 "--collectives must be off, compile or lockstep" \
    "$P" --schedule "$S" --collectives sometimes
expect_err usage_timeout 2 "--timeout must be a plain decimal number of seconds" \
    "$P" --schedule "$S" --timeout -1
expect_err usage_limit 2 "--recompile-limit must be an integer" \
    "$P" --schedule "$S" --recompile-limit 0
expect_err usage_unknown 2 "unknown option '--fast'" "$P" --schedule "$S" --fast
expect_err usage_two_programs 2 "one program only" "$P" "$P" --schedule "$S"
expect_err usage_missing_value 2 "--schedule needs a value" "$P" --schedule
CCOL_JIT_TEST_KILL_RANK=x expect_err usage_hook 2 \
    "CCOL_JIT_TEST_KILL_RANK must be" "$P" --schedule "$S"
if timeout 10 "$CCOL" jit --help | grep -q "usage: ccol jit"; then
    ok usage_help
else
    bad usage_help "no usage on stdout"
fi

# bad_sched NAME NEEDLE JSON: a malformed schedule is exit status 2 with a
# message naming the call and argument.
bad_sched() {
    printf '%s' "$3" >"$TMP/bad.json"
    expect_err "schedule_$1" 2 "$2" "$P" --schedule "$TMP/bad.json" -n 2
}
bad_sched not_json "line 1 column" '{"calls": [}'
bad_sched not_object "must be an object {\"calls\"" '[1]'
bad_sched no_calls "\"calls\" must be a list of calls" '{"calls": 3}'
bad_sched extra_key "unknown key \"steps\"" '{"calls": [], "steps": 1}'
bad_sched call_not_object "call 0: a call must be an object" '{"calls": [1]}'
bad_sched no_fn "call 0: \"fn\" must be a function name" \
    '{"calls": [{"args": []}]}'
bad_sched empty_fn "call 0: \"fn\" must not be empty" \
    '{"calls": [{"fn": "", "args": []}]}'
bad_sched fn_item "call 1: \"fn\"[1] must be a function name" \
    '{"calls": [{"fn": "f", "args": []}, {"fn": ["f", 2], "args": []}]}'
bad_sched both_args "call 0: give exactly one of \"args\" and \"per_rank\"" \
    '{"calls": [{"fn": "f", "args": [], "per_rank": [[], []]}]}'
bad_sched args_type "call 0: \"args\" must be a list of arguments" \
    '{"calls": [{"fn": "f", "args": 3}]}'
bad_sched arg_kind "call 0: argument 1: expected a number, true, false" \
    '{"calls": [{"fn": "f", "args": [1, "x"]}]}'
bad_sched tensor_dim "call 0: argument 0: \"tensor\"[1] must be an integer" \
    '{"calls": [{"fn": "f", "args": [{"tensor": [2, -1]}]}]}'
bad_sched tensor_ndim "call 0: argument 0: \"tensor\" has 9 entries" \
    '{"calls": [{"fn": "f", "args": [{"tensor": [1,1,1,1,1,1,1,1,1]}]}]}'
bad_sched tensor_big "exceeds the limit" \
    '{"calls": [{"fn": "f", "args": [{"tensor": [100000, 100000]}]}]}'
bad_sched stride_len "call 0: argument 0: \"stride\" has 1 entries but the tensor has 2 dims" \
    '{"calls": [{"fn": "f", "args": [{"tensor": [2, 3], "stride": [1]}]}]}'
bad_sched mark_range "call 0: argument 0: \"mark_dynamic\"[0] must be a dim in [0, 2)" \
    '{"calls": [{"fn": "f", "args": [{"tensor": [2, 3], "mark_dynamic": [2]}]}]}'
bad_sched mark_both "call 0: argument 0: a dim is marked both dynamic and static" \
    '{"calls": [{"fn": "f", "args": [{"tensor": [2, 3], "mark_dynamic": [0], "mark_static": [0]}]}]}'
bad_sched tensor_key "call 0: argument 0: unknown key \"dtype\"" \
    '{"calls": [{"fn": "f", "args": [{"tensor": [2], "dtype": "f16"}]}]}'
bad_sched list_item "call 2: argument 0 item 1: expected a number" \
    '{"calls": [{"fn": "f", "args": []}, {"fn": "f", "args": []}, {"fn": "f", "args": [{"list": [1, {}]}]}]}'
bad_sched per_rank_arg "call 0: rank 1: argument 0: \"tensor\" must be a list" \
    '{"calls": [{"fn": "f", "per_rank": [[1], [{"tensor": 3}]]}]}'
bad_sched per_rank_count "call 0: \"per_rank\" has 3 argument lists for 2 ranks" \
    '{"calls": [{"fn": "f", "per_rank": [[], [], []]}]}'
bad_sched fn_count "call 1: \"fn\" names 3 functions for 2 ranks" \
    '{"calls": [{"fn": "f", "args": []}, {"fn": ["f", "g", "h"], "args": []}]}'
bad_sched duplicate "duplicate object key" \
    '{"calls": [{"fn": "f", "args": [], "args": []}]}'
bad_sched domains_type "\"domains\" must be a list of domains" \
    '{"calls": [], "domains": 3}'
bad_sched domains_item "\"domains\"[0] must be a non-empty list of ranks" \
    '{"calls": [], "domains": [[]]}'
bad_sched domains_order "\"domains\"[0][1] must be a rank (0 to 4095) above the one before it" \
    '{"calls": [], "domains": [[1, 0]]}'
bad_sched domains_overlap "rank 1 is in two domains" \
    '{"calls": [], "domains": [[0, 1], [1]]}'
bad_sched domains_missing "rank 1 is in no domain" \
    '{"calls": [], "domains": [[0]]}'
bad_sched domains_past "\"domains\"[1] names rank 2 of a job of 2 ranks" \
    '{"calls": [], "domains": [[0], [1, 2]]}'
# A schedule written for 4 ranks run alone or on 3 says which -n it needs.
expect_err schedule_suggest_n_alone 2 \
    "4 argument lists for 1 rank; this process is alone (no -n, no launcher): use -n 4" \
    "$EX/mlp.tl" --schedule "$EX/mlp.json"
expect_err schedule_suggest_n 2 "for 3 ranks; the schedule is written for 4 ranks: use -n 4" \
    "$EX/mlp.tl" --schedule "$EX/mlp.json" -n 3
expect_err schedule_directory 2 "is a directory, not a schedule" \
    "$P" --schedule "$TMP" -n 2
truncate -s 65M "$TMP/huge.json"
expect_err schedule_too_large 2 "larger than the limit of 64 MiB" \
    "$P" --schedule "$TMP/huge.json" -n 2
rm -f "$TMP/huge.json"
expect_err schedule_missing_file 2 "cannot open the schedule" \
    "$P" --schedule "$TMP/none.json" -n 2

# A program that does not load is found before any rank starts: exit
# status 2 like other usage errors, the error on stderr, nothing on stdout.
printf 'def f(x):\n    return x +\n' >"$TMP/syntax.tl"
expect_err program_syntax_error 2 "syntax.tl:2:15: error: expected an expression" \
    "$TMP/syntax.tl" --schedule "$S" -n 2 --json --timeout 5
if [ "$(sed -n 2,3p "$TMP/err")" = "$(printf '    return x +\n              ^')" ]
then
    ok program_syntax_caret
else
    bad program_syntax_caret "$(details)"
fi
expect_err program_missing_file 2 "nothing.tl: cannot open the program" \
    "$TMP/nothing.tl" --schedule "$S" -n 2 --json --timeout 5
expect_err program_directory 2 "is a directory, not a program" \
    "$TMP" --schedule "$S" -n 2 --json --timeout 5
# So is a CCOL_* variable the ranks would refuse, with or without -n.
CCOL_TRANSPORT=carrier-pigeon expect_err env_transport 2 \
    "CCOL_TRANSPORT='carrier-pigeon' is not a transport: use inproc, tcp or shm" \
    "$P" --schedule "$S" -n 2 --json
CCOL_TRANSPORT=carrier-pigeon RANK=0 WORLD_SIZE=1 expect_err env_transport_joined 2 \
    "CCOL_TRANSPORT='carrier-pigeon' is not a transport" \
    "$P" --schedule "$S" --json
CCOL_TIMEOUT=1e308 expect_err env_timeout_range 2 \
    "CCOL_TIMEOUT='1e308' is not a plain decimal number of seconds in [0.001, 10000000]" \
    "$P" --schedule "$S" -n 2
CCOL_TIMEOUT=0x10 expect_err env_timeout_hex 2 "CCOL_TIMEOUT='0x10' is not" \
    "$P" --schedule "$S" -n 2
expect_err timeout_tiny 2 "--timeout must be a plain decimal number" \
    "$P" --schedule "$S" -n 2 --timeout 1e-9
# A stale launcher variable of this process does not matter with -n: the
# ranks are given their own.
RANK=x MASTER_PORT=none jit "$P" --schedule "$S" -n 2 --json --timeout 5
pycheck env_own_ranks "assert rc == 0 and j['ok']"
printf 'def f(x, n):\n    return x[100]\n' >"$TMP/runtime.tl"
jit "$TMP/runtime.tl" --schedule "$S" -n 2 --json --timeout 5
pycheck program_runtime_error "
assert rc == 1
for e in j['ranks']:
    assert e['error']['code'] == 'PROGRAM', e['error']
    m = e['error']['message']
    assert 'call 0 (f)' in m and 'runtime.tl:2:' in m, m"

# Program errors are diagnostics on stderr, as a compiler prints them:
# file:line:col, the source line and a caret, once for all the ranks that
# hit the same error; with --json stdout is the JSON object alone, and the
# error stays in it.
diag_check() {
    local name=$1 file=$2 line=$3 n=$4 msg
    if msg=$(python3 -S - "$TMP/out" "$TMP/err" "$file" "$line" "$n" \
        "$RC" 2>&1 <<'EOF'
import json, sys
out, err, file, line, n, rc = sys.argv[1:]
text = open(out).read()
assert text.count("\n") == 1, "stdout is not one line"
j = json.loads(text)
assert rc == "1" and not j["ok"]
for e in j["ranks"]:
    assert e["error"]["code"] == "PROGRAM", e
    assert f"{file}:{line}:" in e["error"]["message"], e
lines = open(err).read().splitlines()
heads = [l for l in lines if f"{file}:{line}:" in l]
assert len(heads) == 1, f"the diagnostic is printed {len(heads)} times"
want = "ranks 0-%d: " % (int(n) - 1)
assert heads[0].startswith(want), heads[0]
i = lines.index(heads[0])
src, caret = lines[i + 1], lines[i + 2]
assert caret.strip() == "^", caret
col = int(heads[0].split(f"{file}:{line}:")[1].split(":")[0])
assert caret.index("^") == col - 1, (src, caret, col)
EOF
    ); then
        ok "$name"
    else
        bad "$name" "$msg
$(details)"
    fi
}
jit "$TMP/runtime.tl" --schedule "$S" -n 3 --json --timeout 5
diag_check diagnostic_runtime runtime.tl 2 3
# Without --json too: the diagnostic on stderr, the summary's line for the
# ranks on stdout (first line only), never the caret on stdout.
jit "$TMP/runtime.tl" --schedule "$S" -n 3 --timeout 5
if [ "$RC" -eq 1 ] && grep -q "^ranks 0-2: call 0 (f): .*runtime.tl:2:" \
    "$TMP/err" && grep -q "^ranks 0-2: PROGRAM: call 0 (f): " "$TMP/out" &&
    ! grep -q "\^" "$TMP/out" && [ "$(wc -l <"$TMP/out")" = 5 ]; then
    ok diagnostic_text
else
    bad diagnostic_text "$(details)"
fi
# Errors that differ are grouped apart: rank 1 calls a missing function.
jit "$P" --schedule "$G/missing.3.json" -n 3 --timeout 5 --collectives off
if [ "$RC" -eq 1 ] && [ "$(grep -c "^rank 1: PROGRAM: " "$TMP/out")" = 1 ] &&
    [ "$(grep -c "^rank 1: call 1 (nope): " "$TMP/err")" = 1 ] &&
    ! grep -q "^ranks" "$TMP/out" "$TMP/err"; then
    ok diagnostic_grouped_apart
else
    bad diagnostic_grouped_apart "$(details)"
fi
# A job of many identical ranks: one group, not one block per rank.
jit "$P" --schedule "$S" -n 24 --timeout 30
if [ "$RC" -eq 0 ] && [ "$(wc -l <"$TMP/out")" = 5 ] &&
    grep -q "^ranks 0-23: ok$" "$TMP/out"; then
    ok summary_grouped
else
    bad summary_grouped "$(details)"
fi

# Bytes that are not UTF-8 in the program: the summary stays one valid
# JSON object, a failed call is never ok, and --check does not pass it.
printf 'def f(x, n):\n    # caf\xe9\n    return x[100] # \xe9\xff\n' \
    >"$TMP/latin1.tl"
for extra in "" --check; do
    jit "$TMP/latin1.tl" --schedule "$S" -n 2 --json --timeout 5 $extra
    pycheck "program_latin1_error${extra:+_check}" "
assert rc == 1 and not j['ok'], j
for e in j['ranks']:
    assert not e['ok'] and e['error']['code'] == 'PROGRAM', e
    assert 'latin1.tl:3:' in e['error']['message'], e['error']
    assert '\ufffd' in e['error']['message'], e['error']"
done
printf '\x80\x01\xfe\n\xc3(\x00\xed\xa0\x80 def\n' >"$TMP/binary.tl"
expect_err program_binary 2 "binary.tl:1:1: error: unexpected byte 0x80" \
    "$TMP/binary.tl" --schedule "$S" -n 2 --json --check --timeout 5
printf 'def f(x, n):\n    # caf\xe9\n    return x.sum() * n\n' \
    >"$TMP/latin1_ok.tl"
jit "$TMP/latin1_ok.tl" --schedule "$S" -n 2 --json --timeout 5
pycheck program_latin1_comment_ok "
assert rc == 0 and j['ok'], j
for e in j['ranks']:
    assert len(e['results']) == 3, e"

# A rank killed mid-schedule: its entry says how it ended, the others'
# errors name it, and nothing hangs.
K=$G/kill.json
CCOL_JIT_TEST_KILL_RANK=1 jit "$P" --schedule "$K" -n 3 --json --timeout 5
pycheck killed_rank "
assert rc == 1 and not j['ok']
e = j['ranks'][1]['error']
assert e['code'] == 'CRASHED', e
assert 'rank 1 was killed by signal 9' in e['message'], e
for r in (0, 2):
    e = j['ranks'][r]['error']
    assert e is not None and 'rank 1' in e['message'], e"
CCOL_JIT_TEST_KILL_RANK=2:exit jit "$P" --schedule "$K" -n 3 --collectives off \
    --json --timeout 5
pycheck exited_rank "
assert rc == 1
e = j['ranks'][2]['error']
assert e['code'] == 'CRASHED', e
assert 'rank 2 exited with status 3' in e['message'], e
for r in (0, 1):
    e = j['ranks'][r]['error']
    assert e is not None and 'rank 2' in e['message'], e"
CCOL_JIT_TEST_KILL_RANK=0 jit "$P" --schedule "$K" -n 2 --timeout 5
if [ "$RC" -eq 1 ] && grep -q "rank 0: CRASHED: rank 0 was killed by signal 9" \
    "$TMP/out" && grep -q "^rank 1: .*rank 0" "$TMP/out"; then
    ok killed_rank_text
else
    bad killed_rank_text "$(details)"
fi
# A rank stalled past the deadline: the others get TIMEOUT naming it.
CCOL_JIT_TEST_KILL_RANK=1:stall=3 jit "$P" --schedule "$K" -n 2 --json \
    --timeout 1
pycheck stalled_rank "
assert rc == 1
e = j['ranks'][0]['error']
assert e['code'] == 'TIMEOUT' and 'missing rank: 1' in e['message'], e
assert j['ranks'][1]['error'] is not None"

# The pids among the arguments that still run (a zombie has ended).
running() {
    local p st
    for p in "$@"; do
        st=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -d' ' -f1)
        [ -n "$st" ] && [ "$st" != Z ] && printf '%s ' "$p"
    done
}

# A SIGKILLed launcher takes its ranks with it (PR_SET_PDEATHSIG, as with
# `ccol run`): rank 1 stalls for 60 s and rank 0 waits for it, yet both
# are gone within a few seconds of the launcher.
test_launcher_killed() {
    local tpid lpid ranks="" left i
    CCOL_JIT_TEST_KILL_RANK=1:stall=60 timeout -k 5 90 "$CCOL" jit "$P" \
        --schedule "$K" -n 2 --timeout 60 >"$TMP/out" 2>"$TMP/err" &
    tpid=$!
    for i in $(seq 200); do
        lpid=$(pgrep -P "$tpid" -x ccol)
        [ -n "$lpid" ] && ranks=$(pgrep -P "$lpid" | tr '\n' ' ')
        [ "$(wc -w <<<"$ranks")" = 2 ] && break
        sleep 0.05
    done
    if [ "$(wc -w <<<"$ranks")" != 2 ]; then
        bad launcher_killed "ranks not started: '$ranks' launcher '$lpid'"
        kill -KILL $tpid $lpid $ranks 2>/dev/null
        { wait "$tpid"; } 2>/dev/null
        return
    fi
    sleep 1 # into the schedule: rank 1 stalls, rank 0 waits
    kill -KILL "$lpid"
    for i in $(seq 100); do
        left=$(running $ranks)
        [ -z "$left" ] && break
        sleep 0.05
    done
    { wait "$tpid"; } 2>/dev/null # quiet: bash would report "Killed"
    if [ -n "$left" ]; then
        kill -KILL $left 2>/dev/null
        bad launcher_killed "ranks outlived the launcher by 5 s: $left"
        return
    fi
    ok launcher_killed
}
test_launcher_killed

# --check fails naming the call, the rank and both values when a
# compiled result is wrong (the hook adds 1 to rank 1's result of call 3).
CCOL_JIT_TEST_KILL_RANK=1:skew jit "$P" --schedule "$K" -n 2 --check --json \
    --timeout 5
pycheck check_mismatch "
assert rc == 1 and 'rank 1' in j['ranks'][0]['error']['message']
e = j['ranks'][1]['error']
assert e['code'] == 'MISMATCH', e
assert e['message'].startswith('call 3 (f) on rank 1: compiled result '), e
assert 'differs from the eager result' in e['message'], e
assert len(j['ranks'][1]['results']) == 4"
# Without --check the same wrong result goes unnoticed.
CCOL_JIT_TEST_KILL_RANK=1:skew jit "$P" --schedule "$K" -n 2 --json --timeout 5
pycheck check_off_unnoticed "
assert rc == 0 and j['ok']"

# Readable output.
jit "$P" --schedule "$G/breaks.2.json" -n 2 --timeout 5
if [ "$RC" -eq 0 ] && grep -q "^ccol jit: 2 ranks, collectives lockstep: ok" \
    "$TMP/out" && grep -q "^ranks 0-1: ok" "$TMP/out" &&
    grep -q "frame logged: 2 compiles, dynamic: L\['x'\].size(0)" "$TMP/out" &&
    grep -q "^\[rank 1\] rows 4" "$TMP/out"; then
    ok readable_summary
else
    bad readable_summary "$(details)"
fi
# With --json, print() output goes to stderr.
jit "$P" --schedule "$G/breaks.2.json" -n 2 --json --timeout 5
if [ "$RC" -eq 0 ] && grep -q "^\[rank 0\] rows 6" "$TMP/err"; then
    ok json_prints_to_stderr
else
    bad json_prints_to_stderr "$(details)"
fi

# --explain prints each rank's decisions to stderr; --trace must not fail.
jit "$P" --schedule "$G/skew.2.json" -n 2 --explain --json --timeout 5 \
    --trace "$TMP/trace"
if [ "$RC" -eq 0 ] && grep -q "^\[rank 1\] .*L\['x'\]" "$TMP/err"; then
    ok explain_and_trace
else
    bad explain_and_trace "$(details)"
fi

# One rank, no launcher: a job of one, mode off by default.
jit "$P" --schedule "$G/same.2.json" --json
pycheck single_rank "
assert rc == 0 and j['world_size'] == 1 and j['mode'] == 'off'
assert j['ranks'][0]['compiles'] == 1"

# join2 SCHED ARGS...: starts 2 ranks by hand with torchrun's variables
# (no launcher); rank 0's stdout in $TMP/out, its status in $RC, rank 1's
# stdout in $TMP/join.1 and status in $RC1.
join2() {
    local sched=$1 port pids=() r
    shift
    port=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
    for r in 0 1; do
        RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 \
            MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 60 "$CCOL" jit \
            "$P" --schedule "$sched" --json "$@" >"$TMP/join.$r" \
            2>"$TMP/join.err.$r" &
        pids+=($!)
    done
    wait "${pids[0]}"
    RC=$?
    wait "${pids[1]}"
    RC1=$?
    cp "$TMP/join.0" "$TMP/out"
    cp "$TMP/join.err.0" "$TMP/err"
}

# A trace directory that cannot be written: one warning on stderr naming
# it, and the job goes on (the trace format's promise).
for d in /proc/ccol-nope "$TMP/missing/sub" "$P"; do
    jit "$P" --schedule "$S" -n 2 --json --timeout 5 --trace "$d"
    if [ "$RC" -eq 0 ] &&
        [ "$(grep -c "warning: --trace $d: .*tracing disabled" "$TMP/err")" = 1 ]
    then
        pycheck "trace_unwritable_$(basename "$d")" "assert j['ok']"
    else
        bad "trace_unwritable_$(basename "$d")" "$(details)"
    fi
done
[ ! -e "$TMP/missing" ] && ok trace_unwritable_nothing_made ||
    bad trace_unwritable_nothing_made "$(ls -R "$TMP/missing")"

# Joining: rank 0 prints the job, rank 1 nothing on stdout.
join2 "$G/skew.2.json" --timeout 10
pycheck joined_job "
assert rc == 0 and $RC1 == 0
assert j['world_size'] == 2 and j['mode'] == 'lockstep'
for e in j['ranks']:
    assert e['frames'][0]['dynamic'] == [\"L['x'].size(0)\"], e
assert open('$TMP/join.1').read() == ''"
# A failed job: both entries still gathered (over a new communicator when
# the failure poisoned the first); every rank exits 1.
join2 "$G/missing.2.json" --timeout 5
pycheck joined_failure "
assert rc == 1 and $RC1 == 1
assert j['ranks'][1]['error']['code'] == 'PROGRAM'
assert j['ranks'][0]['error']['code'] == 'DIVERGED'
assert 'rank 1' in j['ranks'][0]['error']['message']"
# A rank killed: rank 0 prints what it knows, its own entry on stderr too.
CCOL_JIT_TEST_KILL_RANK=1 join2 "$G/kill.json" --timeout 2
pycheck joined_killed "
assert rc == 1 and $RC1 == 137
assert j['ranks'][0]['error']['code'] == 'PEER'
assert 'rank 1' in j['ranks'][0]['error']['message']
assert j['ranks'][1]['error']['code'] == 'UNKNOWN'
assert '[rank 0] summary: {' in open('$TMP/err').read()"

# The demo: the same error on every waiting rank is printed once for all
# of them, and a message's source line and caret keep their own lines.
timeout 120 "$CCOL" demo >"$TMP/out" 2>"$TMP/err"
RC=$?
if [ "$RC" -eq 0 ] && [ "$(grep -c "^  ranks 0-2: TIMEOUT: " "$TMP/out")" = 1 ] &&
    ! grep -q "^  rank [0-2]: " "$TMP/out" &&
    grep -q "^ *g2 = all_reduce(h.t() @ y) / world_size()$" "$TMP/out" &&
    grep -qx " *\^" "$TMP/out"; then
    ok demo_messages
else
    bad demo_messages "$(details)"
fi
# ... and its diagnostics cite the lines of examples/mlp.tl itself.
line=$(grep -o "examples/mlp.tl:[0-9]*:10: error:" "$TMP/out" | head -n 1 |
    cut -d: -f2)
if [ -n "$line" ] && sed -n "${line}p" "$EX/mlp.tl" |
    grep -q "^    g2 = all_reduce(h.t() @ y) / world_size()$"; then
    ok demo_cites_the_file
else
    bad demo_cites_the_file "line '$line': $(grep -m1 mlp.tl "$TMP/out")"
fi

# Under the launcher: `ccol run` starts the ranks, rank 0 prints.
timeout 60 "$CCOL" run -n 2 -- "$CCOL" jit "$P" --schedule "$G/breaks.2.json" \
    --timeout 5 --explain >"$TMP/out" 2>"$TMP/err"
RC=$?
if [ "$RC" -eq 0 ] &&
    grep -q "^\[rank 0\] ccol jit: 2 ranks, collectives lockstep: ok" "$TMP/out" &&
    ! grep -q "^\[rank 1\] ccol jit" "$TMP/out" &&
    ! grep -q "\[rank [01]\] \[rank" "$TMP/out" "$TMP/err"; then
    ok under_ccol_run
else
    bad under_ccol_run "$(details)"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
