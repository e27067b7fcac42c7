"""The type stubs describe the extension that was built."""

import os
import subprocess
import sys


def test_stubs_match_the_extension(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "ccol._ccol"],
        capture_output=True, text=True, timeout=300, cwd=str(tmp_path),
        env={**os.environ, "MYPYPATH": ""})
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Success" in out.stdout
