"""The determinism gate on kernels that leave part of their output unwritten: the causal
attention product of ``workspaces/transformer`` computes only the blocks its mask keeps, so
the bytes above the diagonal held whatever the fresh arena held, and ``kinac run
workspaces/transformer block_small --deterministic`` said "not deterministic" (exit 1) at that
product although every run computes the same. ``np.empty`` here returns a different fill on
each call, as fresh memory may: before the fix the two recorded runs differed."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_determinism_gpu_fake import _entry, _tensor, _view, fake  # noqa: F401

from kinac.cli import main
from kinac.observe.determinism import first_difference, record_gpu

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def dirty_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Byte buffers (the host runtime's arenas) come back filled with 0x11, 0x22, ..."""
    real = np.empty
    fills = itertools.count(0x11, 0x11)

    def empty(shape: Any, dtype: Any = float, **kw: Any) -> np.ndarray:
        if np.dtype(dtype) == np.uint8:
            return np.full(shape, next(fills) % 256, dtype=np.uint8)
        return real(shape, dtype, **kw)

    monkeypatch.setattr(np, "empty", empty)


def test_causal_attention_is_deterministic_on_the_host(
    dirty_memory: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", str(ROOT / "workspaces" / "transformer"), "attention_small", "--repeat", "1",
            "--deterministic", "--cache-dir", str(tmp_path / ".c")]  # fmt: skip
    rc = main(args)
    out = capsys.readouterr()
    assert rc == 0, out.out + out.err
    assert "kernels and outputs bit-identical to a second run" in out.out


def test_unwritten_arena_bytes_on_the_gpu(fake: None) -> None:  # noqa: F811
    """The fake two-step GPU entry with step 0 a kernel that writes 5 of its 6 values; between
    the two records the arena's sixth value changes, as another entry's use of fresh pool
    memory would change it."""
    e = _entry()
    x = _tensor(e.resource, np.arange(6, dtype=np.float32))
    y = _tensor(e.resource, np.full(6, 0.5, np.float32))

    def bind(ptrs: tuple[int, ...]) -> Any:
        xp, yp, out = ptrs

        def k0(stream: Any) -> None:
            _view(e.arena)[:5] = 2 * _view(xp)[:5]

        def k1(stream: Any) -> None:
            _view(out)[:5] = _view(e.arena)[:5] + _view(yp)[:5]
            _view(out)[5] = 0.0

        return None, [k0, k1]

    e._bind = bind  # type: ignore[method-assign]
    _view(e.arena)[5] = 7.0
    base = record_gpu(e, (x, y), "g")
    _view(e.arena)[5] = 123.0
    assert first_difference(base, record_gpu(e, (x, y), "g")) is None
