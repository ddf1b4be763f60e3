"""The hot call of a GPU entry through ``kinac.compile`` in both orders (issue 14, latency of a
small call): every check before the graph launch (``KINAC_LAUNCH_FIRST=0``), or the launch as
soon as the graph, output and addresses are known, the torch versions compared after it.

Both orders must give the same answers: a data write (``mul_``) keeps the call hot with one
launch; a square tensor transposed in place (``t_``: same shape, same address) is imported again,
which reports it (before 2026-12-02e the entry reused its row-major import: a silent wrong
result, in either order); a tensor moved by ``x.data = y`` (no version counted) is imported at
its new address, and one whose memory was freed in place is refused (before: address 0 was
imported and launched). Without a GPU: a real lowering, a driverless entry (``tests/latency_fakes.py``),
torch CPU tensors standing for CUDA ones; launches are counted, never timed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from latency_fakes import LAUNCHES, _Graph, cpu_as_cuda_import, driverless  # noqa: E402

import kinac  # noqa: E402
from kinac.rt import hot  # noqa: E402
from kinac.rt.cuda import entry as entry_mod  # noqa: E402
from kinac.rt.cuda import graph as graph_mod  # noqa: E402
from kinac.rt.cuda.entry_support import KinaGpuError  # noqa: E402

SRC = """(module t)
(defn g [(x : (tensor f32 [N N])) (y : (tensor f32 [N N]))] -> (tensor f32 [N N])
  (add (mul x y) x))
"""


@pytest.fixture(params=[False, True], ids=["checks-first", "launch-first"])
def hot_fn(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, list[Any], bool]:
    """A compiled ``g`` on a driverless entry, called until hot in the order ``param``."""
    first = bool(request.param)
    monkeypatch.setattr(hot, "LAUNCH_FIRST", first)
    g = torch.Generator().manual_seed(0)
    ins = [torch.randn(8, 8, generator=g) for _ in range(2)]
    monkeypatch.setattr(entry_mod, "load_gpu_entry", driverless(ins))
    monkeypatch.setattr(entry_mod.entry_hot, "torch_import", cpu_as_cuda_import)
    monkeypatch.setattr(graph_mod, "capture", lambda seq, stream, name="": _Graph())
    src = tmp_path / "t.kina"
    src.write_text(SRC, encoding="utf-8")
    f = kinac.compile(src, "g", target="cuda", cache_dir=str(tmp_path / "cache"))
    for _ in range(5):
        f(*ins)
    assert f.hot_calls == 2 and f._memo[0] is not None and f._memo[0][9] is first
    return f, ins, first


def test_a_data_write_keeps_the_hot_call_with_one_launch(hot_fn: Any) -> None:
    f, ins, first = hot_fn
    before, hot_before = LAUNCHES[0], f.hot_calls
    ins[0].mul_(1.0)  # torch counts a data write as an in-place change
    f(*ins)
    assert LAUNCHES[0] == before + 1  # never a second (wasted) launch
    # launch first: the form of the written tensor is checked after the launch, the call stays
    # hot; checks first: the fast path (the entry's memo sees the same form)
    assert f.hot_calls == hot_before + (1 if first else 0)
    f(*ins)  # (checks first: the fast path renewed the memo's versions) hot in both orders
    assert f.hot_calls == hot_before + (2 if first else 1)


def test_a_square_tensor_transposed_in_place_is_imported_again(hot_fn: Any) -> None:
    f, ins, _ = hot_fn
    ins[1].t_()  # same shape, same address, strides swapped
    with pytest.raises(KinaGpuError, match="`y` is not contiguous"):
        f(*ins)
    ins[1].t_()  # back to row-major: the calls work again
    f(*ins)


def test_a_tensor_moved_without_a_version_is_imported_at_its_new_address(hot_fn: Any) -> None:
    f, ins, _ = hot_fn
    entry = next(iter(f._entries.values()))
    before = LAUNCHES[0]
    ins[0].data = ins[0].clone()  # another address; torch counts no in-place change
    f(*ins)
    # the addresses are compared before the launch in both orders: one launch, at the new one
    assert LAUNCHES[0] == before + 1
    assert list(entry._bound)[-1][0] == ins[0].data_ptr()
    hit = entry._imports[(0, id(ins[0]))]
    assert hit[1].ptr == ins[0].data_ptr()


def test_a_tensor_whose_memory_was_freed_in_place_is_refused(hot_fn: Any) -> None:
    """``untyped_storage().resize_(0)`` frees a tensor's memory in place (torch counts no
    change; its ``data_ptr()`` reads 0): before, the entry imported address 0 and launched."""
    f, ins, _ = hot_fn
    before = LAUNCHES[0]
    ins[1].untyped_storage().resize_(0)
    with pytest.raises(KinaGpuError, match="`y` has no memory to read"):
        f(*ins)
    assert LAUNCHES[0] == before  # nothing launched, in either order


def test_the_entry_called_directly_sees_a_transposed_tensor_in_both_orders(hot_fn: Any) -> None:
    f, ins, first = hot_fn
    entry = next(iter(f._entries.values()))
    for _ in range(2):
        entry(*ins)
    before, hot_before = LAUNCHES[0], entry.hot_calls
    ins[1].mul_(1.0)  # a data write: hot, one launch
    entry(*ins)
    assert (LAUNCHES[0], entry.hot_calls) == (before + 1, hot_before + 1)
    ins[1].t_()
    with pytest.raises(KinaGpuError, match="`y` is not contiguous"):
        entry(*ins)
    # launch first: one launch computed garbage into an output nobody holds, then the error
    assert LAUNCHES[0] == before + 1 + (1 if first else 0)
    assert entry.hot_calls == hot_before + 1
