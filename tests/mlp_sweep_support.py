"""The MLP of ``workspaces/mlp`` at one size of ``benches/runtime_sweep.py``'s sweep, compiled
for CUDA, with its weights and an input buffer: the setup the host-input GPU tests
(``tests/test_staging_gpu.py``, ``tests/test_pinned_gpu.py``) each wrote out in full.

Why a context manager: the source is copied into a temporary folder (``kinac.compile`` then
builds it with no cache, so a test never reads or writes the repository's caches) that must
live as long as the compiled function is used.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class SweepMlp:
    """``fn(x, *ws)`` is the compiled MLP; ``x`` an uninitialised f32 ``[B, S, D]`` numpy input
    the test fills; ``rng`` the numpy generator seeded like the weights."""

    fn: Any
    ws: list[Any]
    x: np.ndarray
    rng: np.random.Generator


@contextmanager
def sweep_mlp(size: int, seed: int | None = None) -> Iterator[SweepMlp]:
    """The MLP at ``SWEEP[size]`` (``B, S, D, F``), weights ``randn * fan_in ** -0.5`` from a
    torch generator seeded ``seed`` (default ``size``) on the GPU, ``rng`` seeded the same."""
    import torch

    import kinac

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from benches.runtime_sweep import SWEEP

    seed = size if seed is None else seed
    b, s, d, f = SWEEP[size]
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "mlp.kina"
        src.write_text((ROOT / "workspaces/mlp/mlp.kina").read_text(encoding="utf-8"))
        fn = kinac.compile(src, "mlp", target="cuda", no_cache=True)
        g = torch.Generator().manual_seed(seed)
        shapes = ((d, f), (f,), (f, d), (d,))
        ws = [(torch.randn(sh, generator=g) * sh[0] ** -0.5).cuda() for sh in shapes]
        yield SweepMlp(fn, ws, np.empty((b, s, d), np.float32), np.random.default_rng(seed))
