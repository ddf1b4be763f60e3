"""``python -m kinac.rt.cuda.kernel_timer_child``: time candidate kernels for a parent process.

Started by :mod:`kinac.rt.cuda.kernel_timer_isolated` so that a candidate that hangs or faults
takes this process down, not the parent's. Reads one JSON document on stdin (the kernels' PTX
and geometry, buffer sizes, the fill pattern in base64, the indices to time), and writes one
JSON line per candidate, ``{"i": index, "ms": milliseconds or null, "lost": ""}``, flushed as
soon as it is timed: the parent treats the first index without a line as the one that was
running. ``lost`` names the driver error of a candidate that broke the CUDA context; the child
then exits, and the parent gives the rest to a new child.

The timing is :func:`kinac.rt.cuda.kernel_timer.time_each` (what the in-process timer runs), or,
for tests, the generator named ``module:function`` by ``KINAC_KERNEL_TIMER_FAKE`` (same
signature), so the supervision is tested without a GPU.
"""

from __future__ import annotations

import base64
import importlib
import json
import math
import os
import sys
from collections.abc import Callable, Iterator
from typing import IO, Any

from kinac.rt.cuda.kernel_timer import FAKE_ENV, SETUP_FAILED, TimedKernel, time_each

Timing = Callable[..., Iterator[tuple[float, str]]]


def timing_function() -> Timing:
    """The real measurement, or the test's fake named by ``KINAC_KERNEL_TIMER_FAKE``."""
    name = os.environ.get(FAKE_ENV, "").strip()
    if not name:
        return time_each
    module, _, attr = name.partition(":")
    fn = getattr(importlib.import_module(module), attr)
    assert callable(fn)
    return fn  # type: ignore[no-any-return]


def main() -> int:
    out = _protocol_stdout()
    doc = json.loads(sys.stdin.buffer.read())
    kernels = [
        TimedKernel(k["ptx"], k["function"], tuple(k["grid"]), int(k["block"]), int(k["shared"]))  # type: ignore[arg-type]
        for k in doc["kernels"]
    ]
    todo = [int(i) for i in doc["todo"]]
    fill = base64.b64decode(doc["fill"])
    gen = timing_function()(
        tuple(kernels[i] for i in todo), tuple(doc["buffer_bytes"]), fill,
        float(doc["round_ms"]), int(doc["rounds"]), int(doc["device"]),
    )  # fmt: skip
    started = False
    try:
        for i, (ms, lost) in zip(todo, gen, strict=False):
            started = True
            ms_json = ms if math.isfinite(ms) else None
            out.write(json.dumps({"i": i, "ms": ms_json, "lost": lost}) + "\n")
            out.flush()
            if lost:
                return 3
    except Exception as e:  # noqa: BLE001 - reported to the parent, which decides
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 1 if started else SETUP_FAILED
    return 0


def _protocol_stdout() -> IO[str]:
    """The real stdout for protocol lines only; fd 1 then points at stderr, so whatever a
    library prints (the driver, a JIT warning) cannot be mistaken for a result."""
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return out


def _entry() -> None:
    code: Any = main()
    sys.stdout.flush()
    os._exit(code)  # no interpreter teardown: nothing of a broken context's to unwind


if __name__ == "__main__":
    _entry()
