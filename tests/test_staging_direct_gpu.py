"""A caller's pinned ``x`` with its DMA queued first (``staging_direct``, 2026-12-02e) on a GPU:
the MLP through ``kinac.compile``, ``x`` a ``pinned_empty`` array and a ``pin_memory()`` tensor
refilled in place right after each call returns (the contract: the call returned once its DMA
read the array), gives the device-input call's result bit for bit, with the early DMA and
without it. The CPU tests (``tests/test_staging_direct.py``) check the order of each call's
driver work over the fake driver."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from mlp_sweep_support import sweep_mlp

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("how", ["calls", "graph", "off"])
def test_pinned_inputs_refilled_after_each_call_equal_device_inputs(
    how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``how``: the early DMA as driver calls (the default), as the copy graph, or off."""
    early = how != "off"
    from kinac.rt import cuda

    if not cuda.available():
        pytest.skip(f"no CUDA GPU ({cuda.unavailable_reason()})")
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no PyTorch CUDA")
    from kinac.rt.cuda import pinned_empty, staging_direct

    taken: list[int] = []
    direct_call = staging_direct.direct_call

    def counted(*a: Any) -> Any:
        out = direct_call(*a)
        taken.append(out is not None)
        return out

    monkeypatch.setattr(staging_direct, "direct_call", counted)
    with sweep_mlp(0, seed=len(how)) as m:  # x 0.5 MiB
        fn, ws, x, rng = m.fn, m.ws, m.x, m.rng
        fn(x, *ws)
        st = next(e for key, e in fn._entries.items() if key[0][0].device == "cpu")._stager
        st.early_dma = st.pin_cache = early
        st.direct_by_calls = how == "calls"
        buf = pinned_empty(x.shape, np.float32)
        xt = torch.empty(x.shape).pin_memory()
        xs, outs = [], []
        d0 = st.direct
        for k in range(24):  # each output read (DLPack, cloned) before the next call
            a: Any = buf if (k // 8) % 2 == 0 else xt  # eight calls of each in turn
            if a is buf:
                buf[...] = rng.standard_normal(x.shape, dtype=np.float32)
                xs.append(buf.copy())
            else:
                xt.copy_(torch.from_numpy(rng.standard_normal(x.shape, dtype=np.float32)))
                xs.append(xt.numpy().copy())
            outs.append(torch.from_dlpack(fn(a, *ws)).clone())
        n = len(taken)
        prev = None
        for _ in range(16):  # each output held until the next call returned, then read
            buf[...] = rng.standard_normal(x.shape, dtype=np.float32)
            xs.append(buf.copy())
            y = fn(buf, *ws)
            if prev is not None:
                outs.append(torch.from_dlpack(prev).clone())
            prev = y
        outs.append(torch.from_dlpack(prev).clone())
        del prev, y
        torch.cuda.synchronize()
        why = f"direct_call ran: {taken}; direct DMAs {st.direct - d0}"
        assert st.graph_error is None and st.direct - d0 >= 34, why  # (a first call: the entry's)
        assert (sum(taken[n:]) >= 8) if early else not taken, why
        for k, (xk, o) in enumerate(zip(xs, outs, strict=True)):
            want = torch.from_dlpack(fn(torch.from_numpy(xk).cuda(), *ws)).cpu()
            assert torch.equal(o.cpu(), want), f"{how}, call {k}"
