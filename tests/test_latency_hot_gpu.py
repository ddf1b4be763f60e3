"""The hot call's two orders on a GPU (issue 14, docs/call_path.md "Launch first"): the small
bf16 block through ``kinac.compile`` gives bit-identical outputs with every check before the
launch and with the launch first; a tensor moved by ``x.data = y`` (which torch counts as no
change) is read at its new address, a data write (``copy_``) stays hot and is read, and a square
weight transposed in place (``t_``) is refused as a first call refuses it, in both orders."""

from __future__ import annotations

from pathlib import Path

import pytest

from kinac.rt import hot

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("first", [False, True], ids=["checks-first", "launch-first"])
def test_both_orders_read_moved_written_and_transposed_tensors_right(
    first: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kinac.rt import cuda

    if not cuda.available():
        pytest.skip(f"no CUDA GPU ({cuda.unavailable_reason()})")
    import torch
    from gpu_refs import SMALL, block_inputs

    import kinac
    from kinac.rt.cuda.entry_support import KinaGpuError

    monkeypatch.setattr(hot, "LAUNCH_FIRST", first)
    h, kv = SMALL["h"], SMALL["kv"]
    ins = block_inputs(SMALL, torch.bfloat16)
    other = block_inputs(SMALL, torch.bfloat16, seed=1)
    f = kinac.compile(ROOT / "workspaces/transformer", "block", target="cuda")
    g = kinac.compile(ROOT / "workspaces/transformer", "block", target="cuda")  # references

    def ref(xs: list[torch.Tensor]) -> torch.Tensor:
        return torch.from_dlpack(g(h, kv, *[t.clone() for t in xs])).clone()

    # every reference first (g may share f's entry: its calls would re-bind f's memo)
    want, moved, written = (ref([x0, *ins[1:]]) for x0 in (ins[0], other[0], other[0] * 0.5))
    for _ in range(5):
        out = torch.from_dlpack(f(h, kv, *ins))
    assert f._memo[0] is not None and f._memo[0][9] is first
    assert torch.equal(out, want)
    del out
    ins[0].data = other[0].clone()  # moved, no version counted
    assert torch.equal(torch.from_dlpack(f(h, kv, *ins)), moved)
    hot_before = f.hot_calls
    ins[0].copy_(other[0] * 0.5)  # a data write: the version moves, the form does not
    for _ in range(3):
        out = torch.from_dlpack(f(h, kv, *ins))
        assert torch.equal(out, written)
    assert f.hot_calls > hot_before
    del out
    wq = 2  # wq is [256, 256]: t_ keeps its shape and address
    assert ins[wq].shape[0] == ins[wq].shape[1]
    ins[wq].t_()
    with pytest.raises(KinaGpuError, match="not contiguous"):
        f(h, kv, *ins)
    ins[wq].t_()
    assert torch.equal(torch.from_dlpack(f(h, kv, *ins)), written)
