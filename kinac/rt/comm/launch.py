"""``kinac launch -n N -- COMMAND ...``: N ranks of one command on this machine, torchrun style.

Why: a sharded entry runs one process per device (NCCL's model). Each rank gets torchrun's
environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``, and
``LOCAL_WORLD_SIZE``), so a command that runs under this launcher runs unchanged under
torchrun or a SLURM script that sets the same variables on several machines.

The launcher watches its children: the first rank that exits with an error (or is killed by a
signal) is named in one ``kinac: error:`` line; the others learn it through the rendezvous
(the dead rank's socket closed) and exit with their own line naming it; any rank still
running after a grace period is terminated. A launch never hangs: a rank stuck outside any
collective is stopped too. A rank that stopped because of a peer exits with code 4
(:class:`~kinac.rt.comm.rendezvous.RankFailure`), so the rank blamed is the first that failed
on its own (a ``kinac: error:`` of its own, a crash, a signal); the launch's exit code is that
rank's (1 for a signal).

Each rank sees one GPU: ``CUDA_VISIBLE_DEVICES`` is the rank's entry of the parent's list (or
``LOCAL_RANK`` when the parent sets none), so every rank's entries run on "its" device 0
(a parent list shorter than N is left as it is).

``kinac`` as the command runs ``python -m kinac`` with this interpreter and this kinac on
``PYTHONPATH`` (the ranks run the kinac that launched them).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kinac.errors import KinaRuntimeError, KinaUsageError
from kinac.rt.comm.rendezvous import EXIT_PEER_FAILED

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
GRACE_S = 5.0  # after a rank fails: how long the others have to report it and exit
# The most ranks one launch starts on one machine. A rank is a process per device (8 GPUs on
# the largest host here; CPU ranks simulate a mesh), and every rank is a Python interpreter
# (~100 MB): -n 100000 forked until the OS refused (EAGAIN). More ranks than this span
# machines: run a launcher per machine (torchrun, SLURM) with RANK and WORLD_SIZE set.
MAX_RANKS = 256


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on now (the OS's choice), for ``MASTER_PORT``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def rank_env(
    base: dict[str, str], rank: int, n: int, addr: str, port: int, timeout_s: float | None
) -> dict[str, str]:
    """torchrun's variables for ``rank`` of ``n`` on one machine."""
    env = dict(base)
    env.update(
        RANK=str(rank),
        WORLD_SIZE=str(n),
        LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=str(n),
        MASTER_ADDR=addr,
        MASTER_PORT=str(port),
    )
    if timeout_s is not None:
        env["KINAC_DIST_TIMEOUT"] = f"{timeout_s:g}"
    # one GPU per rank: rank r sees the r-th visible GPU as its device 0 (where a GPU entry
    # runs by default); a parent's CUDA_VISIBLE_DEVICES listing fewer GPUs than ranks is kept
    visible = base.get("CUDA_VISIBLE_DEVICES")
    listed = [d for d in visible.split(",") if d.strip()] if visible is not None else None
    if listed is None:
        env["CUDA_VISIBLE_DEVICES"] = str(rank)
    elif len(listed) >= n:
        env["CUDA_VISIBLE_DEVICES"] = listed[rank].strip()
    here = str(Path(__file__).resolve().parents[3])  # the directory holding this kinac
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, base.get("PYTHONPATH", "")) if p)
    return env


def command_line(cmd: list[str]) -> list[str]:
    if not cmd:
        raise KinaUsageError("kinac launch: give the command after --, e.g. -- kinac run WS ENTRY")
    if cmd[0] == "kinac":
        return [sys.executable, "-m", "kinac", *cmd[1:]]
    return cmd


@dataclass
class Outcome:
    """How a launch ended: the exit code, and the first failed rank (-1: none)."""

    code: int
    failed_rank: int = -1
    message: str = ""


def _describe_exit(rank: int, code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"rank {rank} was killed by {name}"
    return f"rank {rank} exited with code {code}"


def launch(
    n: int,
    cmd: list[str],
    *,
    master_addr: str = "127.0.0.1",
    master_port: int | None = None,
    timeout_s: float | None = None,
    grace_s: float = GRACE_S,
    env: dict[str, str] | None = None,
) -> Outcome:
    """Run ``cmd`` as ranks ``0..n-1``; wait for all; name the first that failed."""
    if n < 1:
        raise KinaUsageError(f"kinac launch: -n must be at least 1, got {n}")
    if n > MAX_RANKS:
        raise KinaUsageError(
            f"kinac launch: -n {n} is too many ranks for one machine (at most {MAX_RANKS}, one "
            "process each); for more, run a launcher per machine (torchrun, SLURM) with RANK "
            "and WORLD_SIZE set"
        )
    argv = command_line(cmd)
    port = master_port or free_port(master_addr)
    base = dict(os.environ if env is None else env)
    procs: list[subprocess.Popen[bytes]] = []
    die_with_us = _die_with_parent()
    try:
        for r in range(n):
            try:
                procs.append(
                    subprocess.Popen(
                        argv,
                        env=rank_env(base, r, n, master_addr, port, timeout_s),
                        preexec_fn=die_with_us,
                    )
                )
            except OSError as e:
                raise KinaUsageError(
                    f"kinac launch: cannot start {argv[0]!r}: {e.strerror or e}"
                ) from None
        return _watch(procs, grace_s)
    except KeyboardInterrupt:
        _stop(procs)
        raise
    finally:
        _stop(procs)


def _die_with_parent() -> Callable[[], None] | None:
    """What each rank runs between fork and exec so that it dies with the launcher: a launcher
    killed outright (SIGKILL, the OOM killer) cannot stop its ranks, which were orphaned and
    kept their GPUs. Linux's ``prctl(PR_SET_PDEATHSIG, SIGTERM)`` asks the kernel for SIGTERM
    when the parent dies (it survives exec). If the launcher died between the fork and the
    prctl, the child is already orphaned and the signal will never come: it checks its parent
    and exits at once. None elsewhere (no such call: ranks outlive a killed launcher there).

    libc is loaded here, in the parent: the child only makes two calls (preexec_fn runs
    before any of the launcher's threads start)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def child() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(EXIT_PEER_FAILED)

    return child


def _watch(procs: list[subprocess.Popen[bytes]], grace_s: float) -> Outcome:
    """Wait for every rank; the first to fail is the one that exited first with an error
    (one waiting thread per child records when it exited: the ranks that learn of a death
    through the rendezvous exit after it, and must not be blamed)."""
    exits: list[tuple[float, int, int]] = []
    lock = threading.Lock()

    def wait(r: int, p: subprocess.Popen[bytes]) -> None:
        code = p.wait()
        with lock:
            exits.append((time.monotonic(), r, code))

    for r, p in enumerate(procs):
        threading.Thread(target=wait, args=(r, p), daemon=True).start()
    failed_at = None
    while True:
        with lock:
            done = sorted(exits)
        bad = [(r, c) for _, r, c in done if c != 0]
        if bad and failed_at is None:
            failed_at = time.monotonic()
        if len(done) == len(procs):
            break
        if failed_at is not None and time.monotonic() - failed_at > grace_s:
            break
        time.sleep(0.02)
    if not bad:
        return Outcome(0)
    # a rank that stopped because of a peer (exit 4, RankFailure) is not the one to blame
    own = [(r, c) for r, c in bad if c != EXIT_PEER_FAILED]
    rank, code = (own or bad)[0]
    still = [r for r, p in enumerate(procs) if p.poll() is None]
    msg = _describe_exit(rank, code)
    if still:
        msg += f"; stopped rank{'s' * (len(still) > 1)} {' '.join(map(str, still))} still running"
    return Outcome(code if code > 0 else 1, rank, msg)


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """Terminate the ranks still running (SIGTERM, then SIGKILL after 2 s)."""
    live = [p for p in procs if p.poll() is None]
    for p in live:
        p.terminate()
    deadline = time.monotonic() + 2.0
    for p in live:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def launch_command(
    n: int,
    cmd: list[str],
    master_port: int | None = None,
    timeout_s: float | None = None,
) -> int:
    """``kinac launch``: the exit code; a failure is one ``kinac: error:`` line (raised)."""
    out = launch(n, cmd, master_port=master_port, timeout_s=timeout_s)
    if out.code:
        err = KinaRuntimeError(f"kinac launch: {out.message}")
        err.exit_code = out.code  # type: ignore[misc]
        raise err
    return 0
