"""The ``graph`` launch path against a fake driver (CPU only): the struct layout handed to the
driver, when the one-kernel graph is built, refreshed and destroyed, and the plain launch under
a kinac capture.  The real driver runs the same code in tests/test_cuda_gpu.py."""

from __future__ import annotations

import ctypes
import gc
from typing import Any

import pytest

from kinac.rt.cuda import kernel_graph, module
from kinac.rt.cuda.kernel_graph import KernelNodeParams


class FakeDriver:
    """Stands in for libcuda's graph entry points and cuLaunchKernel; records every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.fail_launch = 0
        self.capturing = 0  # what cuStreamIsCapturing reports

    def fn(self, name: str) -> Any:
        def call(*args: Any) -> int:
            if name == "cuStreamIsCapturing":
                args[1]._obj.value = self.capturing
                return 0
            if name == "cuGraphCreate":
                args[0]._obj.value = 0x6000
            elif name == "cuGraphAddKernelNode":
                args[0]._obj.value = 0x7000
                self.calls.append((name, self._params(args[4])))
                return 0
            elif name == "cuGraphInstantiateWithFlags":
                args[0]._obj.value = 0x8000
            elif name == "cuGraphExecKernelNodeSetParams":
                self.calls.append((name, self._params(args[2])))
                return 0
            elif name == "cuGraphLaunch":
                self.calls.append((name, args[0].value, args[1].value))
                return self.fail_launch
            self.calls.append((name,))
            return 0

        return call

    @staticmethod
    def _params(ref: Any) -> tuple[Any, ...]:
        p: KernelNodeParams = ref._obj
        args = (ctypes.c_void_p * 2).from_address(p.kernelParams)
        first = ctypes.c_uint64.from_address(args[0]).value  # type: ignore[arg-type]
        second = ctypes.c_float.from_address(args[1]).value  # type: ignore[arg-type]
        dims = (p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX, p.blockDimY, p.blockDimZ)
        return (p.func, dims, p.sharedMemBytes, first, second)

    def pydll_launch(self) -> Any:
        def launch(*args: Any) -> int:
            self.calls.append(("cuLaunchKernel", args[0].value, args[8].value))
            return 0

        return launch

    def names(self) -> list[str]:
        out = [c[0] for c in self.calls]
        self.calls.clear()
        return out


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeDriver:
    pytest.importorskip("cuda.bindings")  # driver.fail names errors through the bindings
    f = FakeDriver()
    monkeypatch.setattr(kernel_graph, "libcuda_fn", f.fn)
    monkeypatch.setattr(module.driver, "pydll_launch", f.pydll_launch)
    return f


class _Stream:
    def __init__(self, handle: int) -> None:
        self.handle = handle
        self.cvp = ctypes.c_void_p(handle)


def _launch() -> module.Launch:
    k = module.Kernel.__new__(module.Kernel)
    k.handle, k.address, k.name = None, 0x5000, "fake"
    return module.Launch(k, ("ptr", "f32"), (3, 2, 1), 64, 128, args=(0x1000, 1.5), path="graph")


def test_struct_layout_matches_cuda_h() -> None:
    # CUDA_KERNEL_NODE_PARAMS_v2: func, 7 uints, (pad), kernelParams, extra, kern, ctx
    assert KernelNodeParams.kernelParams.offset == 40
    assert KernelNodeParams.ctx.offset == 64 and ctypes.sizeof(KernelNodeParams) == 72


def test_built_on_first_launch_refreshed_on_change_destroyed_once(fake: FakeDriver) -> None:
    launch = _launch()
    assert fake.names() == []  # nothing is built before the first launch
    s = _Stream(0xABC)
    launch.run(s)  # type: ignore[arg-type]
    assert fake.calls == [("cuLaunchKernel", 0x5000, 0xABC)]  # a first launch may be the only one
    fake.calls.clear()
    launch.run(s)  # type: ignore[arg-type]  # the second builds the graph
    assert fake.calls[0] == ("cuGraphCreate",)
    assert fake.calls[1] == (
        "cuGraphAddKernelNode",
        (0x5000, (3, 2, 1, 64, 1, 1), 128, 0x1000, 1.5),
    )
    assert fake.calls[3] == ("cuGraphLaunch", 0x8000, 0xABC)
    assert fake.names() == [
        "cuGraphCreate",
        "cuGraphAddKernelNode",
        "cuGraphInstantiateWithFlags",
        "cuGraphLaunch",
    ]
    launch.run(s)  # type: ignore[arg-type]
    assert fake.names() == ["cuGraphLaunch"]  # unchanged arguments: no refresh
    launch(s, 0x2000, 2.5)  # type: ignore[arg-type]
    assert fake.calls[0] == (
        "cuGraphExecKernelNodeSetParams",
        (0x5000, (3, 2, 1, 64, 1, 1), 128, 0x2000, 2.5),
    )
    assert fake.names() == ["cuGraphExecKernelNodeSetParams", "cuGraphLaunch"]
    launch(s, 0x2000, 2.5)  # type: ignore[arg-type]
    assert fake.names() == ["cuGraphLaunch"]  # the same values again: nothing to copy
    launch.set(1, 4.0)
    launch.run(s)  # type: ignore[arg-type]
    assert fake.calls[0][1][4] == 4.0  # type: ignore[misc]
    assert fake.names() == ["cuGraphExecKernelNodeSetParams", "cuGraphLaunch"]
    launch.update((0x3000, 1.0))
    launch.run(s)  # type: ignore[arg-type]
    assert fake.names() == ["cuGraphExecKernelNodeSetParams", "cuGraphLaunch"]
    launch.close()
    assert fake.names() == ["cuGraphExecDestroy", "cuGraphDestroy"]
    launch.close()  # idempotent
    assert fake.names() == []
    launch.run(s)  # type: ignore[arg-type]
    assert fake.names()[-1] == "cuGraphLaunch"  # rebuilt at once: it has been launched before
    del launch
    gc.collect()
    assert fake.names() == ["cuGraphExecDestroy", "cuGraphDestroy"]  # released when collected


def test_under_a_kinac_capture_it_is_a_plain_kernel_launch(fake: FakeDriver) -> None:
    launch = _launch()
    module.CAPTURING[0] += 1
    try:
        launch.run(_Stream(0xDEF))  # type: ignore[arg-type]
    finally:
        module.CAPTURING[0] -= 1
    assert fake.calls == [("cuLaunchKernel", 0x5000, 0xDEF)]
    assert launch._gstate is not None and launch._gstate.graph is None  # no graph was built


def test_on_a_stream_someone_else_captures_it_is_a_plain_kernel_launch(fake: FakeDriver) -> None:
    launch = _launch()
    launch.run(_Stream(7))  # type: ignore[arg-type]
    launch.run(_Stream(7))  # type: ignore[arg-type]
    assert fake.names()[-1] == "cuGraphLaunch"
    fake.capturing = 1  # CU_STREAM_CAPTURE_STATUS_ACTIVE, e.g. inside torch.cuda.graph
    launch(_Stream(7), 0x2000, 2.0)  # type: ignore[arg-type]
    assert fake.calls == [("cuLaunchKernel", 0x5000, 7)]
    fake.calls.clear()
    fake.capturing = 0
    launch.run(_Stream(7))  # type: ignore[arg-type]
    assert fake.calls[0][0] == "cuGraphExecKernelNodeSetParams" and fake.calls[0][1][3] == 0x2000


def test_a_failed_graph_launch_names_the_call(fake: FakeDriver) -> None:
    from kinac.rt.cuda.errors import CudaError

    launch = _launch()
    launch.run(_Stream(1))  # type: ignore[arg-type]  # plain
    fake.fail_launch = 700  # CUDA_ERROR_ILLEGAL_ADDRESS
    with pytest.raises(CudaError, match="cuGraphLaunch failed.*700"):
        launch.run(_Stream(1))  # type: ignore[arg-type]
