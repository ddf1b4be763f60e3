"""The keyword options of ``kinac.compile`` (and ``kinac.value_and_grad``): which exist, and
what an unknown or inapplicable one gets.

``kinac.compile(path, name, bogus=1)`` used to be accepted silently (the options went to the
GPU runtime only when a CUDA entry was loaded, and a CPU target never read them): a typo such as
``graph=False`` changed nothing and said nothing. An unknown option is a usage error naming it,
listing the valid ones and suggesting the closest; a GPU-only option with ``target="cpu"`` is
harmless (documented as ignored there, so one script can switch targets) and gets a warning.
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Collection, Mapping
from typing import Any

from kinac.errors import KinaUsageError

# every target: the compile cache (kinac.session.Session)
COMMON_OPTIONS = ("cache_dir", "no_cache")
# target="cuda" only: kinac.rt.cuda.entry.GpuEntry's keyword arguments (docs/gpu.md)
GPU_OPTIONS = (
    "graphs",
    "allow_tf32",
    "max_graphs",
    "pinned",
    "pdl",
    "split_grouped",
    "resource",
)


class IgnoredOptionWarning(UserWarning):
    """A ``kinac.compile`` option that does not apply to the chosen target (a GPU option with
    ``target="cpu"``): accepted and ignored, so a script can switch targets by one argument."""


def check_options(
    options: Mapping[str, Any],
    target: str,
    what: str = "kinac.compile",
    extra: Collection[str] = (),
    gpu: bool = True,
) -> None:
    """Refuse an option no target knows (:class:`KinaUsageError`, with the closest name); warn
    (:class:`IgnoredOptionWarning`) about GPU options given with ``target="cpu"``. ``extra``
    names the options of the caller itself (``mesh=``'s): valid as well; ``gpu=False``: the
    caller takes no GPU runtime options (a sharded call)."""
    gpu_options = GPU_OPTIONS if gpu else ()
    valid = (*COMMON_OPTIONS, *extra, *gpu_options)
    unknown = [k for k in options if k not in valid]
    if unknown:
        k = unknown[0]
        close = difflib.get_close_matches(k, valid, n=1, cutoff=0.6)
        hint = f" (did you mean `{close[0]}`?)" if close else ""
        others = f" (also unknown: {', '.join(unknown[1:])})" if len(unknown) > 1 else ""
        gpu_part = f", and for target='cuda' {', '.join(gpu_options)}" if gpu else ""
        raise KinaUsageError(
            f"{what}: unknown option `{k}`{hint}{others}; options: "
            f"{', '.join((*COMMON_OPTIONS, *extra))}{gpu_part}"
        )
    if target == "cpu":
        ignored = [k for k in options if k in GPU_OPTIONS and k not in extra]
        if ignored:
            warnings.warn(
                f"{what}: {', '.join(f'{k}=' for k in ignored)} "
                f"{'applies' if len(ignored) == 1 else 'apply'} to target='cuda' only; "
                "ignored for target='cpu'",
                IgnoredOptionWarning,
                stacklevel=_caller_level(),
            )


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside kinac (the user's ``kinac.compile`` line,
    however many kinac frames lead there: ``kinac.compile``, ``kinac.value_and_grad``)."""
    import os
    import sys

    pkg = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame = sys._getframe(1)  # check_options
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(pkg):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level
