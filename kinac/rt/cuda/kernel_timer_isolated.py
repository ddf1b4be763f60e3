"""Supervise the child processes that time untrusted candidate kernels.

Why a child: the autotuner's candidates are generated variants, some never run on hardware. In
the caller's process a deadlocked one (a barrier phase bug, ``setmaxnreg`` waiting forever)
would hang the first ``kinac.compile`` for good, and a faulting one leaves a sticky error that
breaks every later CUDA call of the process. In a child (``python -m
kinac.rt.cuda.kernel_timer_child``, the same interpreter and environment) both cost a killed
process: the candidate that was running is ``inf`` and a new child times the rest.

The protocol is JSON both ways (never pickle): one document on the child's stdin (PTX text,
names, geometry, buffer sizes, the fill pattern in base64, the indices still to time), and one
line per candidate on its stdout, flushed as soon as that candidate is timed, so the parent
always knows which candidate was running when a child stopped answering or died.

This module starts no CUDA work itself (nor imports the driver): the parent's context is never
touched by what a candidate does.
"""

from __future__ import annotations

import base64
import json
import math
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kinac.rt.cuda.kernel_timer import Failure, TimedKernel


def job_document(
    kernels: tuple[TimedKernel, ...],
    buffer_bytes: tuple[int, ...],
    fill: bytes,
    todo: list[int],
    device: int,
    round_ms: float,
    rounds: int,
) -> bytes:
    """The JSON a child reads on its stdin."""
    doc = {
        "kernels": [
            {
                "ptx": k.ptx,
                "function": k.function,
                "grid": list(k.grid),
                "block": k.block,
                "shared": k.shared,
            }
            for k in kernels
        ],  # fmt: skip
        "buffer_bytes": list(buffer_bytes),
        "fill": base64.b64encode(fill).decode("ascii"),
        "todo": todo,
        "device": device,
        "round_ms": round_ms,
        "rounds": rounds,
    }
    return json.dumps(doc).encode()


def child_command() -> list[str]:
    return [sys.executable, "-m", "kinac.rt.cuda.kernel_timer_child"]


ROOT = str(Path(__file__).resolve().parents[3])  # the directory holding this kinac package


def child_env() -> dict[str, str]:
    """The caller's environment, with :data:`ROOT` first on the path (a caller that put kinac
    on ``sys.path`` by hand still gets the same code in the child)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH", "")) if p)
    return env


def run_children(
    kernels: tuple[TimedKernel, ...],
    buffer_bytes: tuple[int, ...],
    fill: bytes,
    device: int,
    round_ms: float,
    rounds: int,
    timeout_s: float,
    startup_s: float,
    total_s: float,
    max_children: int,
) -> tuple[tuple[float, ...], tuple[Failure, ...]]:
    """See :func:`kinac.rt.cuda.kernel_timer.time_isolated`."""
    from kinac.rt.cuda.kernel_timer import Failure

    times = [math.inf] * len(kernels)
    failures: list[Failure] = []
    todo = list(range(len(kernels)))
    deadline = time.monotonic() + total_s
    children = 0
    while todo:
        if children >= max_children or time.monotonic() >= deadline:
            why = f"{children} timing processes failed" if children >= max_children else (
                f"autotuning time cap of {total_s:g} s reached"
            )  # fmt: skip
            failures += [Failure(i, "not timed", why) for i in todo]
            break
        children += 1
        doc = job_document(kernels, buffer_bytes, fill, todo, device, round_ms, rounds)
        stop = _one_child(doc, todo, times, failures, timeout_s, startup_s, deadline, total_s)
        if stop:
            break
    return tuple(times), tuple(failures)


def _one_child(
    doc: bytes,
    todo: list[int],
    times: list[float],
    failures: list[Failure],
    timeout_s: float,
    startup_s: float,
    deadline: float,
    total_s: float,
) -> bool:
    """Run one child over ``todo`` (consumed as results come); True when timing must stop
    (the child could not set up: the remaining candidates stay ``inf``)."""
    from kinac.rt.cuda.kernel_timer import SETUP_FAILED, Failure

    err = tempfile.TemporaryFile()
    try:
        proc = subprocess.Popen(
            child_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
            env=child_env(), cwd=ROOT, close_fds=True,  # cwd: ``-m`` looks there first
        )  # fmt: skip
    except OSError as e:
        failures += [Failure(i, "not timed", f"cannot start a timing process: {e}") for i in todo]
        todo.clear()
        err.close()
        return True
    assert proc.stdin is not None and proc.stdout is not None
    lines: queue.Queue[bytes | None] = queue.Queue()
    threading.Thread(target=_feed, args=(proc.stdin, doc), daemon=True).start()
    threading.Thread(target=_drain, args=(proc.stdout, lines), daemon=True).start()
    limit = time.monotonic() + startup_s + timeout_s
    try:
        while todo:
            running = todo[0]
            wait = min(limit, deadline) - time.monotonic()
            try:
                raw = lines.get(timeout=max(wait, 0.0))
            except queue.Empty:
                capped = deadline <= limit
                _kill(proc)
                what = "not timed" if capped else "hung"
                why = (
                    f"autotuning time cap of {total_s:g} s reached" if capped
                    else f"no result after {timeout_s:g} s; its process was killed"
                )  # fmt: skip
                failures.append(Failure(running, what, why))
                todo.pop(0)
                return False
            if raw is None:  # the child is gone
                rc = proc.wait()
                tail = _tail(err)
                if rc == SETUP_FAILED:
                    failures += [Failure(i, "not timed", f"timing set-up failed: {tail}") for i in todo]  # fmt: skip
                    todo.clear()
                    return True
                how = f"signal {-rc}" if rc < 0 else f"exit status {rc}"
                failures.append(Failure(running, "crashed", f"its process died ({how}) {tail}".strip()))  # fmt: skip
                todo.pop(0)
                return False
            msg = _parse(raw)
            if msg is None or msg.get("i") != running:
                continue  # not ours (a library's output): the protocol lines carry the index
            ms = msg.get("ms")
            times[running] = float(ms) if isinstance(ms, (int, float)) else math.inf
            todo.pop(0)
            if msg.get("lost"):  # the child stops there: the rest go to a new one
                failures.append(Failure(running, "faulted", f"the CUDA context was lost ({msg['lost']})"))  # fmt: skip
                return False
            limit = time.monotonic() + timeout_s
        return False
    finally:
        try:
            proc.wait(timeout=5 if not todo else 0)  # done: it frees its memory and exits
        except subprocess.TimeoutExpired:
            _kill(proc)
        err.close()


def _feed(pipe: IO[bytes], doc: bytes) -> None:
    try:
        pipe.write(doc)
        pipe.close()
    except OSError:  # the child died before reading it all: its exit is what is reported
        pass


def _drain(pipe: IO[bytes], lines: queue.Queue[bytes | None]) -> None:
    try:
        for line in pipe:
            lines.put(line)
    finally:
        lines.put(None)


def _parse(raw: bytes) -> dict[str, Any] | None:
    try:
        msg = json.loads(raw)
    except ValueError:
        return None
    return msg if isinstance(msg, dict) else None


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill the child; wait a while for the driver to tear its context down, never forever."""
    proc.kill()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _tail(err: IO[bytes]) -> str:
    """The last line the child wrote on stderr (its error), shortened."""
    err.seek(0)
    text = err.read().decode(errors="replace").strip().splitlines()
    return text[-1][:160] if text else ""
