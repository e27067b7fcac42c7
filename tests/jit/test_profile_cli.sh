#!/usr/bin/env bash
# test_profile_cli.sh - `ccol jit --profile FILE` end to end (docs/cli.md,
# "Profiles"): a cold run on 2 ranks compiles every frame twice (static,
# then dynamic) and writes FILE; runs from FILE on 3, 1 and 2 ranks (and
# with collectives off, and joining a job started by hand) compile every
# frame once, with the same dynamic decisions and the same results as cold
# runs; ranks that read different files agree on the lowest rank's; a
# corrupt, truncated or foreign FILE is a warning naming it and a cold
# start with correct results (and is replaced by a good profile); FILE in
# a read-only directory is a warning and exit status 0; a failed job
# leaves FILE alone. Every command runs under `timeout`.
# Usage: bash test_profile_cli.sh PATH-OF-CCOL SOURCE-DIR
set -u
CCOL=${1:?usage: test_profile_cli.sh PATH-OF-CCOL SOURCE-DIR}
TMP=$(mktemp -d)
trap 'chmod -R u+w "$TMP" 2>/dev/null; rm -rf "$TMP"' EXIT
chmod 755 "$TMP" # the read-only case runs as another user when root
. "$(dirname "$0")/cli_lib.sh"

# Two functions and a resume frame (the print): sizes and an int change
# at every call, so a cold run compiles each frame twice.
cat >"$TMP/p.tl" <<'EOF'
def f(x):
    return (x * 2.0).sum()

def g(x, k):
    y = relu(x) + k
    print(k)
    return y.sum() + k
EOF
cat >"$TMP/s.json" <<'EOF'
{"calls": [
 {"fn": "f", "args": [{"tensor": [4, 3]}]},
 {"fn": "g", "args": [{"tensor": [2, 5]}, 3]},
 {"fn": "f", "args": [{"tensor": [5, 3]}]},
 {"fn": "g", "args": [{"tensor": [2, 6]}, 4]},
 {"fn": "f", "args": [{"tensor": [6, 3]}]},
 {"fn": "g", "args": [{"tensor": [2, 7]}, 5]}
]}
EOF
P=$TMP/p.tl
S=$TMP/s.json
F=$TMP/prof

cat >"$TMP/lib.py" <<'EOF'
import json

DYN = {"f": ["L['x'].size(0)"], "g": ["L['k']", "L['x'].size(1)"],
       "resume_in_g_at_6": ["L['k']", "L['y'].size(1)"]}

def load(path, profile=True):
    text = open(path).read()
    assert len(text.splitlines()) == 1, "stdout is not one line"
    j = json.loads(text)
    keys = ["ok", "world_size", "mode"] + (["profile"] if profile else [])
    assert list(j) == keys + ["ranks"], f"job keys {list(j)}"
    if profile:
        assert list(j["profile"]) == ["loaded", "frames", "written"], \
            j["profile"]
    for e in j["ranks"]:
        assert "profile" not in e, e
    return j

def frames(j, compiles):
    for e in j["ranks"]:
        got = {f["name"]: (f["compiles"], f["dynamic"]) for f in e["frames"]}
        want = {n: (compiles, d) for n, d in DYN.items()}
        assert got == want, (e["rank"], got)

def same_results(j, ref):
    assert [e["results"] for e in j["ranks"]] == \
        [e["results"] for e in ref["ranks"]], (j["ranks"], ref["ranks"])
EOF

# pycheck NAME CODE: python CODE with `j` the job on stdout, `rc` the exit
# status, `err` the standard error.
pycheck() {
    local name=$1 code=$2 msg
    if msg=$(cd "$TMP" && python3 -S - "$TMP/out" "$RC" "$TMP/err" 2>&1 <<EOF
import sys
from lib import *
rc = int(sys.argv[2])
err = open(sys.argv[3]).read()
$code
EOF
    ); then
        ok "$name"
    else
        bad "$name" "$msg
$(details)"
    fi
}

# Cold references without --profile (and the JSON as before: no
# "profile" key), one per number of ranks.
for n in 1 2 3; do
    jit "$P" --schedule "$S" -n "$n" --json --timeout 20
    cp "$TMP/out" "$TMP/cold.$n"
    pycheck "cold_reference_$n" "
j = load(sys.argv[1], profile=False)
assert rc == 0 and j['ok']
frames(j, 2)"
done

# A cold run with --profile: said once, compiles twice, writes FILE.
jit "$P" --schedule "$S" -n 2 --json --timeout 20 --profile "$F"
pycheck cold_run_writes_profile "
j = load(sys.argv[1])
assert rc == 0 and j['ok']
assert j['profile'] == {'loaded': False, 'frames': 0, 'written': True}
frames(j, 2)
same_results(j, load('$TMP/cold.2', profile=False))
assert err.count('--profile $F: no such file yet: cold start') == 1, err
assert 'warning' not in err, err
assert open('$F', 'rb').read(12) == b'CCOLPROF\x01\x00\x00\x00'"
cp "$F" "$TMP/good"

# Warm runs at other sizes and modes: every frame compiles once, dynamic
# where the cold run ended up, with the cold run's results; the profile
# written back is the same bytes (nothing new was learned).
warm() {
    local name=$1 n=$2
    shift 2
    cp "$TMP/good" "$F"
    jit "$P" --schedule "$S" -n "$n" --json --timeout 20 --profile "$F" "$@"
    pycheck "$name" "
j = load(sys.argv[1])
assert rc == 0 and j['ok']
assert j['profile'] == {'loaded': True, 'frames': 3, 'written': True}
frames(j, 1)
same_results(j, load('$TMP/cold.$n', profile=False))
assert 'cold start' not in err and 'warning' not in err, err
assert open('$F', 'rb').read() == open('$TMP/good', 'rb').read()"
}
warm warm_3_ranks 3
warm warm_1_rank 1
warm warm_2_ranks 2
warm warm_2_ranks_compile_mode 2 --collectives compile
warm warm_2_ranks_collectives_off 2 --collectives off

# The readable summary says where the job started from.
cp "$TMP/good" "$F"
jit "$P" --schedule "$S" -n 2 --timeout 20 --profile "$F"
if [ "$RC" -eq 0 ] &&
    grep -q "^profile: started from 3 frames; written$" "$TMP/out"; then
    ok text_summary
else
    bad text_summary "$(details)"
fi

# join2 PROFILE0 PROFILE1: a job of two ranks started by hand (torchrun's
# variables), each with its own --profile; rank 0's output in out/err.
join2() {
    local port pids=() r prof
    port=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
    for r in 0 1; do
        [ "$r" = 0 ] && prof=$1 || prof=$2
        RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 \
            MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 60 "$CCOL" jit \
            "$P" --schedule "$S" --json --timeout 20 --profile "$prof" \
            >"$TMP/join.$r" 2>"$TMP/join.err.$r" &
        pids+=($!)
    done
    wait "${pids[0]}"
    RC=$?
    wait "${pids[1]}"
    RC1=$?
    cp "$TMP/join.0" "$TMP/out"
    cat "$TMP/join.err.0" "$TMP/join.err.1" >"$TMP/err"
}

cp "$TMP/good" "$F"
join2 "$F" "$F"
pycheck joined_job_warm "
j = load(sys.argv[1])
assert rc == 0 and $RC1 == 0 and j['ok']
assert j['profile'] == {'loaded': True, 'frames': 3, 'written': True}
frames(j, 1)
same_results(j, load('$TMP/cold.2', profile=False))
assert open('$TMP/join.1').read() == ''"

# Ranks that read different files agree on the lowest rank that has one:
# rank 0 has none, rank 1 the good profile; rank 0 writes its own path.
rm -f "$TMP/r0"
join2 "$TMP/r0" "$F"
pycheck joined_ranks_agree "
j = load(sys.argv[1])
assert rc == 0 and $RC1 == 0 and j['ok']
assert j['profile'] == {'loaded': True, 'frames': 3, 'written': True}
frames(j, 1)
assert 'cold start' not in err, err
assert open('$TMP/r0', 'rb').read() == open('$TMP/good', 'rb').read()"

# A file that is not a good profile: a warning naming it and what is
# wrong on every rank that read it, a cold start with correct results,
# and a good profile written in its place.
broken() {
    local name=$1 want=$2
    jit "$P" --schedule "$S" -n 2 --json --timeout 20 --profile "$F"
    pycheck "$name" "
j = load(sys.argv[1])
assert rc == 0 and j['ok']
assert j['profile'] == {'loaded': False, 'frames': 0, 'written': True}
frames(j, 2)
same_results(j, load('$TMP/cold.2', profile=False))
for r in (0, 1):
    assert f'[rank {r}] warning: --profile $F: ' in err, err
assert err.count('$want') == 2, err
assert err.count('--profile $F: no usable profile: cold start') == 1, err
assert open('$F', 'rb').read() == open('$TMP/good', 'rb').read()"
}
printf 'not a profile at all\n' >"$F"
broken garbage_file "not a ccol profile (it does not start with CCOLPROF)"
head -c 100 "$TMP/good" >"$F"
broken truncated_file "truncated: the header announces"
python3 -c "
import sys
b = bytearray(open(sys.argv[1], 'rb').read())
b[16 + 6] = 0xff  # the first frame's name announces 255 bytes
open(sys.argv[2], 'wb').write(b)" "$TMP/good" "$F"
broken corrupt_document "not a profile: bad state document"
: >"$F"
broken empty_file "empty file"
rm -f "$F"
mkdir "$F"
jit "$P" --schedule "$S" -n 2 --json --timeout 20 --profile "$F"
pycheck directory_not_file "
j = load(sys.argv[1])
assert rc == 0 and j['ok']
assert j['profile'] == {'loaded': False, 'frames': 0, 'written': False}
assert 'not a regular file' in err and 'not written' in err, err"
rmdir "$F"

# A read-only directory: the profile loads, the write fails with a
# warning, the exit status stays 0. As root, permissions do not stop
# writes: the job then runs as nobody (setpriv).
RO=$TMP/ro
mkdir "$RO"
cp "$TMP/good" "$RO/prof"
chmod 644 "$RO/prof"
chmod 555 "$RO"
as_user=()
if [ "$(id -u)" = 0 ]; then
    as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    "${as_user[@]}" true 2>/dev/null || as_user=(skip)
fi
if [ "${as_user[0]:-}" = skip ]; then
    ok "read_only_directory # SKIP setpriv cannot drop root here"
else
    timeout 120 "${as_user[@]}" "$CCOL" jit "$P" --schedule "$S" -n 2 \
        --json --timeout 20 --profile "$RO/prof" >"$TMP/out" 2>"$TMP/err"
    RC=$?
    pycheck read_only_directory "
j = load(sys.argv[1])
assert rc == 0 and j['ok']
assert j['profile'] == {'loaded': True, 'frames': 3, 'written': False}
frames(j, 1)
assert err.count('[rank 0] warning: --profile $RO/prof: not written: '
                 'cannot create a temporary file in $RO') == 1, err
import os
assert os.listdir('$RO') == ['prof'], os.listdir('$RO')"
fi
# A path that cannot exist: a cold start, a warning, exit status 0.
jit "$P" --schedule "$S" -n 2 --json --timeout 20 \
    --profile /proc/ccol-nope/prof
pycheck unwritable_path "
j = load(sys.argv[1])
assert rc == 0 and j['ok']
assert j['profile'] == {'loaded': False, 'frames': 0, 'written': False}
assert 'no such file yet: cold start' in err, err
assert err.count('warning: --profile /proc/ccol-nope/prof: not written') \
    == 1, err"

# A failed job (rank 1 leaves in the middle) writes nothing.
printf 'old bytes\n' >"$F"
CCOL_JIT_TEST_KILL_RANK=1:exit jit "$P" --schedule "$S" -n 2 --json \
    --timeout 5 --profile "$F"
pycheck failed_job_writes_nothing "
j = load(sys.argv[1])
assert rc == 1 and not j['ok']
assert j['profile']['written'] is False, j['profile']
assert open('$F', 'rb').read() == b'old bytes\n'"

# Usage: an empty file name.
jit "$P" --schedule "$S" -n 2 --profile ""
if [ "$RC" -eq 2 ] && grep -q "profile needs a file name" "$TMP/err"; then
    ok usage_empty_name
else
    bad usage_empty_name "$(details)"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
