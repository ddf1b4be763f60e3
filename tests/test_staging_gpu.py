"""The host-input steady state's round-2 paths on a GPU (issue 17's last goal): the streaming
copy into the pinned blocks (one thread at 1 MiB, the copier's threads at 4 MiB; 32- and 64-byte
stores) and the call bound for ``kinac.compile``'s memo give what the same MLP gives for the same
``x`` on the device, bit for bit, with ``x`` rewritten in place after each call returns and no
synchronisation in between. The CPU tests (``tests/test_staging_hot.py``) check which path
each call takes over the fake driver."""

from __future__ import annotations

import numpy as np
import pytest
from mlp_sweep_support import sweep_mlp

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize(("size", "width"), [(1, 32), (1, 64), (3, 32)])
def test_streamed_bound_calls_equal_device_inputs(size: int, width: int) -> None:
    from kinac.rt import cuda

    if not cuda.available():
        pytest.skip(f"no CUDA GPU ({cuda.unavailable_reason()})")
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no PyTorch CUDA")
    with sweep_mlp(size) as m:
        fn, ws, x, rng = m.fn, m.ws, m.x, m.rng
        xs, outs = [], []
        st = None
        for k in range(12):
            if k == 2:  # the stager exists: stream at this size with these stores
                st = next(e for key, e in fn._entries.items() if key[0][0].device == "cpu")._stager
                st.stream_min, st.stream_width = 0, width
                st.memo[0] = None
            x[...] = rng.standard_normal(x.shape, dtype=np.float32)
            xs.append(x.copy())
            outs.append(torch.from_dlpack(fn(x, *ws)).clone())  # (the output block is reused)
        torch.cuda.synchronize()
        assert st is not None and st.graph_error is None
        assert st.streamed >= 6 and st.graph_calls >= 6 and fn.hot_calls >= 4
        for k, (xk, o) in enumerate(zip(xs, outs, strict=True)):
            want = torch.from_dlpack(fn(torch.from_numpy(xk).cuda(), *ws)).cpu()
            assert torch.equal(o.cpu(), want), f"size {size}, call {k}"


@pytest.mark.parametrize(("pieces", "flags"), [(2, False), (4, True)])
def test_copy_graphs_in_pieces_with_or_without_the_flag_equal_device_inputs(
    pieces: int, flags: bool
) -> None:
    """Round 3's copy graphs (the DMA in ``pieces`` on parallel branches; the flag's copy and
    *done* kept or dropped, for numpy inputs and for a ``pinned_empty`` array the call waits
    for): a numpy ``x`` and a ``pinned_empty`` ``x`` in turn, each refilled in place right
    after the call returns, give the device-input call's result bit for bit."""
    from kinac.rt import cuda

    if not cuda.available():
        pytest.skip(f"no CUDA GPU ({cuda.unavailable_reason()})")
    import torch

    from kinac.rt.cuda import pinned_empty

    if not torch.cuda.is_available():
        pytest.skip("no PyTorch CUDA")
    with sweep_mlp(1, seed=pieces) as m:  # x 1 MiB
        fn, ws, x, rng = m.fn, m.ws, m.x, m.rng
        buf = pinned_empty(x.shape, np.float32)
        xs, outs = [], []
        st = None
        for k in range(16):
            if k == 2:
                st = next(e for key, e in fn._entries.items() if key[0][0].device == "cpu")._stager
                st.dma_pieces, st.copy_flag, st.direct_flag = pieces, flags, flags
                st.memo[0] = None
            a = buf if (k // 3) % 2 else x  # three calls of each in turn
            a[...] = rng.standard_normal(a.shape, dtype=np.float32)
            xs.append(a.copy())
            outs.append(torch.from_dlpack(fn(a, *ws)).clone())
        torch.cuda.synchronize()
        assert st is not None and st.graph_error is None
        assert st.graph_calls >= 10 and st.direct >= 4
        for k, (xk, o) in enumerate(zip(xs, outs, strict=True)):
            want = torch.from_dlpack(fn(torch.from_numpy(xk).cuda(), *ws)).cpu()
            assert torch.equal(o.cpu(), want), f"pieces {pieces}, flags {flags}, call {k}"
