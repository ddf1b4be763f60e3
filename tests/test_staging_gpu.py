"""The host-input steady state's round-2 paths on a GPU (issue 17's last goal): the streaming
copy into the pinned blocks (one thread at 1 MiB, the copier's threads at 4 MiB; 32- and 64-byte
stores) and the call bound for ``kinac.compile``'s memo give what the same MLP gives for the same
``x`` on the device, bit for bit, with ``x`` rewritten in place after each call returns and no
synchronisation in between. The CPU tests (``tests/test_staging_hot.py``) check which path
each call takes over the fake driver."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(("size", "width"), [(1, 32), (1, 64), (3, 32)])
def test_streamed_bound_calls_equal_device_inputs(size: int, width: int) -> None:
    from kinac.rt import cuda

    if not cuda.available():
        pytest.skip(f"no CUDA GPU ({cuda.unavailable_reason()})")
    import torch

    import kinac

    if not torch.cuda.is_available():
        pytest.skip("no PyTorch CUDA")
    sys.path.insert(0, str(ROOT))
    from benches.runtime_sweep import SWEEP

    b, s, d, f = SWEEP[size]
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "mlp.kina"
        src.write_text((ROOT / "workspaces/mlp/mlp.kina").read_text(encoding="utf-8"))
        fn = kinac.compile(src, "mlp", target="cuda", no_cache=True)
        g = torch.Generator().manual_seed(size)
        shapes = ((d, f), (f,), (f, d), (d,))
        ws = [(torch.randn(sh, generator=g) * sh[0] ** -0.5).cuda() for sh in shapes]
        rng = np.random.default_rng(size)
        x = np.empty((b, s, d), np.float32)
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

    import kinac
    from kinac.rt.cuda import pinned_empty

    if not torch.cuda.is_available():
        pytest.skip("no PyTorch CUDA")
    sys.path.insert(0, str(ROOT))
    from benches.runtime_sweep import SWEEP

    b, s, d, f = SWEEP[1]  # x 1 MiB
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "mlp.kina"
        src.write_text((ROOT / "workspaces/mlp/mlp.kina").read_text(encoding="utf-8"))
        fn = kinac.compile(src, "mlp", target="cuda", no_cache=True)
        g = torch.Generator().manual_seed(pieces)
        shapes = ((d, f), (f,), (f, d), (d,))
        ws = [(torch.randn(sh, generator=g) * sh[0] ** -0.5).cuda() for sh in shapes]
        rng = np.random.default_rng(pieces)
        x = np.empty((b, s, d), np.float32)
        buf = pinned_empty((b, s, d), np.float32)
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
