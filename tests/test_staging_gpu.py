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
