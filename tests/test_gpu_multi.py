"""Two-GPU tests: runtime objects, memory and entries placed on ``cuda:1`` (``@cuda(1)``).

Skipped unless the machine has two CUDA devices and PyTorch with CUDA (``scripts/gpu.sh`` on the
lent ``nvidia-h200-x2`` runs them). What they pin down:
  * streams, modules and memory resources belong to the GPU that is current when they are made;
    memory from a resource lands on its GPU whatever is current at the allocation;
  * an entry placed on ``cuda:1`` runs there, returns tensors that PyTorch sees on ``cuda:1``,
    matches PyTorch, and leaves the caller's current device as it was;
  * an array on the wrong GPU is refused with a clear error, before anything runs.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from kinac.codegen.ptx import compile_ptx
from kinac.ir.gpu.pipeline import lower_graph_gpu
from kinac.ir.testing import GraphBuilder
from kinac.rt import cuda
from kinac.rt.cuda.driver import api, check
from kinac.rt.cuda.entry import GpuEntry, KinaGpuError, load_gpu_entry
from kinac.rt.cuda.testing import TestKernels, read_u32

ROOT = Path(__file__).resolve().parent.parent


def _two_gpus() -> bool:
    if not (cuda.available() and torch.cuda.is_available()):
        return False
    return int(check("cuDeviceGetCount", api().cuDeviceGetCount())) >= 2


pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not _two_gpus(), reason="needs two CUDA GPUs and PyTorch with CUDA"),
]


def _ordinal_of(ptr: int) -> int:
    """The GPU whose context ``ptr`` was allocated in.  (Through cuda-bindings 13.3 the
    DEVICE_ORDINAL attribute reads 0 even for PyTorch's cuda:1 memory; CONTEXT is right.)"""
    d = api()
    attr = d.CUpointer_attribute.CU_POINTER_ATTRIBUTE_CONTEXT
    ctx = int(check("cuPointerGetAttribute", d.cuPointerGetAttribute(attr, ptr)))
    ordinals = [o for o in (0, 1) if cuda.device.lookup(o).context_handle == ctx]
    assert len(ordinals) == 1, f"0x{ptr:x} is in no known primary context"
    return ordinals[0]


def test_streams_modules_and_memory_follow_the_current_gpu() -> None:
    cuda.get_device(1)
    assert cuda.current_device().ordinal == 1
    s1, s2 = cuda.Stream(), cuda.Stream()
    k = TestKernels()  # the test kernels load into GPU 1's context
    assert k.device.ordinal == 1
    pool = cuda.make_resource("pool")
    assert pool.ordinal == 1
    n = 1 << 16
    p = pool.allocate(4 * n, s1.handle)
    assert _ordinal_of(p) == 1
    k.fill(p, n, 0xC0FFEE, s1)
    cuda.order_streams(s1.handle, s2.handle)  # GPU 1's own event
    k.fill(p, n // 2, 7, s2)
    got = read_u32(p, n, s2)
    assert (got[: n // 2] == 7).all() and (got[n // 2 :] == 0xC0FFEE).all()
    t = cuda.Tensor.empty((4, 8), "float32", pool, s1.handle)
    assert t.__dlpack_device__() == (2, 1)
    tt = torch.from_dlpack(t)
    assert tt.device == torch.device("cuda", 1) and tt.data_ptr() == t.ptr
    assert _ordinal_of(torch.empty(8, device="cuda:1").data_ptr()) == 1  # the probe itself
    assert _ordinal_of(torch.empty(8, device="cuda:0").data_ptr()) == 0
    # with GPU 0 current, the GPU-1 pool still allocates on GPU 1 (a new 300 MiB segment)
    cuda.get_device(0)
    big = pool.allocate(300 << 20, 0)
    assert _ordinal_of(big) == 1 and cuda.current_device().ordinal == 0
    pool.deallocate(big, 300 << 20, 0)
    pool.deallocate(p, 4 * n, s2.handle)
    s1.synchronize()
    s2.synchronize()


def _mlp(device: str) -> GpuEntry:
    g = GraphBuilder("mlp1")
    x = g.param("x", "f32", (4, 32, 64), device)
    w1 = g.param("w1", "f32", (64, 128), device)
    b1 = g.param("b1", "f32", (128,), device)
    w2 = g.param("w2", "f32", (128, 64), device)
    h = g.unary("gelu", g.binary("add", g.matmul(x, w1), b1))
    lw = lower_graph_gpu(g.build(g.matmul(h, w2)))
    return load_gpu_entry(lw, compile_ptx(lw.llvm_ir))


def _inputs(device: str, seed: int) -> list[Any]:
    gen = torch.Generator().manual_seed(seed)
    shapes = ((4, 32, 64), (64, 128), (128,), (128, 64))
    return [torch.randn(s, generator=gen).to(device) for s in shapes]


def _reference(x: Any, w1: Any, b1: Any, w2: Any) -> Any:
    f = torch.float64
    h = torch.nn.functional.gelu(x.to(f) @ w1.to(f) + b1.to(f))
    return (h @ w2.to(f)).float().cpu().numpy()


def test_an_entry_on_cuda1_runs_there_and_leaves_the_current_device_alone() -> None:
    torch.cuda.set_device(0)
    cuda.get_device(0)
    e1 = _mlp("cuda:1")
    assert e1.ordinal == 1 and e1.resource.ordinal == 1
    assert cuda.current_device().ordinal == 0 and torch.cuda.current_device() == 0
    for seed in range(3):
        ins = _inputs("cuda:1", seed)
        out = torch.from_dlpack(e1(*ins))
        assert out.device == torch.device("cuda", 1)
        np.testing.assert_allclose(out.cpu().numpy(), _reference(*ins), rtol=1e-4, atol=1e-4)
        assert cuda.current_device().ordinal == 0 and torch.cuda.current_device() == 0
    host = [t.cpu().numpy() for t in _inputs("cpu", 9)]  # host arrays are copied to GPU 1
    out = torch.from_dlpack(e1(*host))
    assert out.device == torch.device("cuda", 1)
    np.testing.assert_allclose(
        out.cpu().numpy(), _reference(*map(torch.from_numpy, host)), rtol=1e-4, atol=1e-4
    )
    e0 = _mlp("cuda:0")  # and a GPU-0 entry right after, in the same process
    ins0 = _inputs("cuda:0", 4)
    out0 = torch.from_dlpack(e0(*ins0))
    assert out0.device == torch.device("cuda", 0)
    np.testing.assert_allclose(out0.cpu().numpy(), _reference(*ins0), rtol=1e-4, atol=1e-4)
    with pytest.raises(KinaGpuError, match="`x` is on cuda:0, but the entry runs on cuda:1"):
        e1(*ins0)


def test_graph_path_launches_on_cuda1() -> None:
    cuda.get_device(1)
    s = cuda.Stream()
    k = TestKernels()
    pool = cuda.make_resource("pool")
    n = 4096
    y = pool.allocate(4 * n, s.handle)
    k.fill(y, n, 0, s)
    launch = k.scale_add(y, 1.0, 1.0, n, path="graph")
    for _ in range(5):
        launch(s)
    got = read_u32(y, n, s).view(np.float32)
    np.testing.assert_array_equal(got, np.full(n, 5.0, np.float32))
    pool.deallocate(y, 4 * n, s.handle)


def test_kinac_compile_with_target_device_1(tmp_path: Path) -> None:
    import kinac

    ws = tmp_path / "mlp"
    shutil.copytree(ROOT / "workspaces/mlp", ws)
    toml = (ws / "kina.toml").read_text().replace('kind = "cpu"', 'kind = "cuda"\ndevice = 1')
    (ws / "kina.toml").write_text(toml)
    f = kinac.compile(ws, "mlp", target="cuda", no_cache=True)
    gen = torch.Generator().manual_seed(0)
    shapes = ((4, 128, 256), (256, 1024), (1024,), (1024, 256), (256,))
    ins = [(torch.randn(sh, generator=gen) * 0.1).to("cuda:1") for sh in shapes]
    out = torch.from_dlpack(f(*ins))
    assert out.device == torch.device("cuda", 1)
    x, w1, b1, w2, b2 = (t.double() for t in ins)
    ref = torch.nn.functional.gelu(x @ w1 + b1) @ w2 + b2
    np.testing.assert_allclose(out.cpu().numpy(), ref.float().cpu().numpy(), rtol=1e-4, atol=1e-4)
    from kinac.errors import KinaCallError

    with pytest.raises(KinaCallError, match="cuda:0"):
        f(*(t.to("cuda:0") for t in ins))
