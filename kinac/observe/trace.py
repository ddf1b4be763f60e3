"""The Chrome/Perfetto trace document of a profile, and where it may be written.

The JSON Trace Event Format: ``X`` (complete) events with ``ts``/``dur`` in microseconds, one
``pid`` per run, one ``tid`` per host thread or CUDA stream, named by ``M`` (metadata) events;
Perfetto and ``chrome://tracing`` open it. Split out of :mod:`kinac.observe.profile` so the
file format (and its checks) lives in one place.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def x_event(name: str, cat: str, ts_ns: int, dur_ns: int, tid: int, args: dict[str, Any]) -> dict:
    """A complete (``X``) event; times given in nanoseconds, written in microseconds."""
    return {
        "name": name,
        "cat": cat,
        "ph": "X",
        "ts": ts_ns / 1000,
        "dur": max(dur_ns, 0) / 1000,
        "pid": 1,
        "tid": tid,
        "args": args,
    }


def thread_names(tids: dict[int, int], what: str) -> list[dict[str, Any]]:
    """The ``M`` events naming the process and each track (``{ident: tid}``)."""
    meta: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "kinac"}}
    ]
    for ident, tid in tids.items():
        meta.append(
            {
                "name": "thread_name",
                "ph": "M",
                "pid": 1,
                "tid": tid,
                "args": {"name": f"{what} {ident:#x}"},
            }
        )
    return meta


def trace_target_problem(path: str | Path) -> str | None:
    """Why a trace cannot be written at ``path`` (checked before anything is profiled, so a
    long profile does not end in an error), or None. Mirrors what opening it would say."""
    p = Path(path)
    if str(path) == "":
        return "an empty file name; give one, e.g. trace.json"
    if p.is_dir():
        return f"{path} is a directory; give a file name, e.g. {p / 'trace.json'}"
    parent = p.parent
    if not parent.exists():
        return f"the directory {parent} does not exist"
    if not parent.is_dir():
        return f"{parent} is not a directory"
    if p.exists() and not os.access(p, os.W_OK):
        return f"{path} is not writable"
    if not p.exists() and not os.access(parent, os.W_OK | os.X_OK):
        return f"the directory {parent} is not writable"
    return None


def write_trace_file(path: str | Path, doc: dict[str, Any]) -> None:
    """Write ``doc`` to ``path`` whole or not at all: a failed write (a full disk) leaves any
    earlier trace there as it was, never a truncated JSON file that Perfetto cannot open.
    (The determinism gate writes its manifests through this too.)"""
    p = Path(path)
    p = p.resolve() if p.is_symlink() else p  # replace the file a link points at, not the link
    text = json.dumps(doc, indent=1) + "\n"
    if p.exists() and not p.is_file():
        p.write_text(text)  # a device or pipe (/dev/stdout): written in place
        return
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, p)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
