"""The hot path on a GPU (issue 14): the small transformer block through ``kinac.compile``,
called again and again with the same torch CUDA tensors, runs by the pre-bound graph launch
(counters on the callable and the entry), gives bit-identical results to its first call,
sees a tensor replaced in place (``set_``) and new contents, and still refuses a wrong array
with the full path's message; fresh tensors each call, a side stream's, and parameters that
require a gradient are read right."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kinac.errors import KinaCallError

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parent.parent


def _need_gpu() -> None:
    from kinac.rt import cuda

    if not cuda.available():
        pytest.skip(f"no CUDA GPU ({cuda.unavailable_reason()})")


def test_the_block_takes_the_hot_path_and_stays_right() -> None:
    _need_gpu()
    import torch
    from gpu_refs import SMALL, block_inputs

    import kinac

    f = kinac.compile(ROOT / "workspaces/transformer", "block", target="cuda")
    ins = block_inputs(SMALL, torch.bfloat16)
    h, kv = SMALL["h"], SMALL["kv"]
    first = torch.from_dlpack(f(h, kv, *ins)).clone()
    for _ in range(10):
        f(h, kv, *ins)  # the output dropped: its block serves the next call (one address)
    out = f(h, kv, *ins)
    torch.cuda.synchronize()
    entry = next(iter(f._entries.values()))
    assert f.hot_calls >= 8 and entry.hot_calls >= 8, (f.hot_calls, entry.hot_calls)
    assert entry.captures <= 2  # (a second address while the first call's output was held)
    assert torch.equal(torch.from_dlpack(out), first)
    del out
    # new contents in place: still hot, and the new data is read
    hot = f.hot_calls
    ins[0].mul_(0.5)
    want = torch.from_dlpack(f(h, kv, *ins)).clone()  # (the version moved: the fast path)
    for _ in range(3):
        got = torch.from_dlpack(f(h, kv, *ins))
    assert f.hot_calls > hot and torch.equal(got, want)
    assert not torch.equal(want, first)
    # a tensor whose memory is replaced in place: its new contents are read
    other = block_inputs(SMALL, torch.bfloat16, seed=1)[0]
    ins[0].set_(other.clone())
    for _ in range(4):
        got = torch.from_dlpack(f(h, kv, *ins))
    ref = torch.from_dlpack(f(h, kv, other, *ins[1:])).clone()
    assert torch.equal(got, ref)
    # a wrong array after all that: the full path's message
    with pytest.raises(KinaCallError, match="wq"):
        f(h, kv, ins[0], ins[1], ins[2][:, :128], *ins[3:])


def test_fresh_torch_tensors_each_call_are_read_right() -> None:
    _need_gpu()
    import torch
    from gpu_refs import SMALL, block_inputs

    import kinac

    f = kinac.compile(ROOT / "workspaces/transformer", "block", target="cuda")
    ins = block_inputs(SMALL, torch.bfloat16)
    h, kv = SMALL["h"], SMALL["kv"]
    want = torch.from_dlpack(f(h, kv, *ins)).clone()
    for i in range(6):  # a new x each call (new addresses: staged after three)
        x = ins[0].clone() if i % 2 else ins[0] + 0
        assert torch.equal(torch.from_dlpack(f(h, kv, x, *ins[1:])), want)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):  # made on a side stream: DLPack's event orders it
        x = ins[0] * 1
        got = torch.from_dlpack(f(h, kv, x, *ins[1:]))
    torch.cuda.synchronize()
    assert torch.equal(got, want)
    # parameters that require a gradient (nn.Parameter): read, as under torch.no_grad()
    params = [torch.nn.Parameter(t.clone()) for t in ins[1:]]
    assert torch.equal(torch.from_dlpack(f(h, kv, ins[0], *params)), want)
    # a conjugate-bit view is DLPack's to judge: an error naming the argument, no traceback
    c = torch.randn(4, dtype=torch.complex64, device="cuda").conj()
    with pytest.raises(KinaCallError):
        f(h, kv, c, *ins[1:])


def test_the_lean_paths_keep_held_outputs_and_see_every_change() -> None:
    """The lean call paths on a GPU (docs/runtime.md "What a hot call costs"): the MLP fed a
    numpy ``x`` through ``kinac.compile``, refilled in place each call, equals the device
    input's result bit for bit; an output the caller holds (or a torch tensor made from it)
    keeps its values while later calls run; ``x`` reshaped in place is bound again."""
    _need_gpu()
    import tempfile

    import numpy as np
    import torch

    import kinac
    from kinac.rt import hot

    assert hot.LEAN
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "mlp.kina"  # outside the workspace: dims free
        src.write_text((ROOT / "workspaces/mlp/mlp.kina").read_text(encoding="utf-8"))
        f = kinac.compile(src, "mlp", target="cuda", no_cache=True)
        ref = kinac.compile(src, "mlp", target="cuda", no_cache=True)  # device x: another callable
        g = torch.Generator().manual_seed(0)
        d, hid = 64, 128
        ws = [(torch.randn(s, generator=g) * 0.1).cuda() for s in ((d, hid), (hid,), (hid, d), (d,))]  # fmt: skip
        rng = np.random.default_rng(0)
        x = np.empty((2, 8, d), np.float32)
        held: list[tuple[Any, Any]] = []
        for k in range(12):
            x[...] = rng.standard_normal(x.shape)
            want = torch.from_dlpack(ref(torch.from_numpy(x).cuda(), *ws)).clone()
            y = f(x, *ws)
            torch.cuda.synchronize()
            assert torch.equal(torch.from_dlpack(y), want), k
            if k in (5, 8):
                held.append((torch.from_dlpack(y) if k == 5 else y, want))
            del y
        entry = next(e for e in f._entries.values() if e._stager is not None)
        assert entry._stager.hot_calls >= 5 and f.hot_calls >= 5
        for y, want in held:  # later calls did not write into an output still held
            assert torch.equal(torch.from_dlpack(y) if not torch.is_tensor(y) else y, want)
        x.shape = (4, 4, d)  # type: ignore[misc]  # in place: another specialisation
        want = torch.from_dlpack(ref(torch.from_numpy(x).cuda(), *ws)).clone()
        assert torch.equal(torch.from_dlpack(f(x, *ws)), want)
