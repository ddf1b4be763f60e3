"""``kinac launch`` bounds (routed from the new-user round): an absurd ``-n`` is a usage
error before anything is forked (it forked until EAGAIN), and a launcher killed outright
(SIGKILL: no chance to stop its ranks) takes its ranks with it (Linux: each rank asks the
kernel for SIGTERM when its parent dies), instead of orphaning them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kinac.cli import main
from kinac.rt.comm.launch import MAX_RANKS

ROOT = Path(__file__).resolve().parents[1]


def test_too_many_ranks_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["launch", "-n", "100000", "--", sys.executable, "-c", "pass"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert err.startswith("kinac: error:") and f"at most {MAX_RANKS}" in err, err


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (dead, not yet reaped by init) is gone for our purpose
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_ranks_die_with_a_killed_launcher(tmp_path: Path) -> None:
    rank = f"import os, time; open({str(tmp_path)!r} + '/' + os.environ['RANK'], 'w').write(str(os.getpid())); time.sleep(60)"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    launcher = subprocess.Popen(
        [sys.executable, "-m", "kinac", "launch", "-n", "2", "--", sys.executable, "-c", rank],
        env=env,
    )
    try:
        deadline = time.monotonic() + 20
        while len(list(tmp_path.iterdir())) < 2 or any(
            not p.read_text() for p in tmp_path.iterdir()
        ):
            assert time.monotonic() < deadline, "the ranks did not start"
            time.sleep(0.02)
        pids = [int(p.read_text()) for p in tmp_path.iterdir()]
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
        deadline = time.monotonic() + 5
        while any(map(_alive, pids)) and time.monotonic() < deadline:
            time.sleep(0.02)
        left = [p for p in pids if _alive(p)]
        for p in left:
            os.kill(p, signal.SIGKILL)
        assert not left, f"ranks {left} outlived their launcher"
    finally:
        launcher.kill()
