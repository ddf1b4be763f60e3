"""DLPack producer/consumer tests on host memory (the same ctypes machinery as on the GPU)."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from kinac.rt.cuda import dlpack
from kinac.rt.cuda.tensor import KDL_CPU, Tensor

torch = pytest.importorskip("torch")


def _settle() -> int:
    gc.collect()
    return dlpack.live_exports()


def test_struct_layout_matches_the_header() -> None:
    import ctypes

    assert ctypes.sizeof(dlpack.DLTensor) == 48
    assert ctypes.sizeof(dlpack.DLManagedTensor) == 64
    assert ctypes.sizeof(dlpack.DLManagedTensorVersioned) == 80
    assert dlpack.DLManagedTensorVersioned.dl_tensor.offset == 32


def test_export_versioned_to_torch_zero_copy() -> None:
    base = _settle()
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = Tensor.host(a)
    assert t.__dlpack_device__() == (KDL_CPU, 0)
    tt = torch.from_dlpack(t)
    assert tt.data_ptr() == t.ptr == a.ctypes.data
    assert tuple(tt.shape) == (3, 4) and tt.dtype == torch.float32
    assert dlpack.live_exports() == base + 1
    tt.mul_(2)  # a PyTorch op writes through the shared memory
    np.testing.assert_array_equal(a, np.arange(12, dtype=np.float32).reshape(3, 4) * 2)
    del tt
    assert _settle() == base  # torch called our deleter


def test_capsule_kinds_and_deleters() -> None:
    base = _settle()
    t = Tensor.host(np.ones(5, dtype=np.int32))
    cap = t.__dlpack__(max_version=(1, 0))
    assert "dltensor_versioned" in repr(cap)
    cap_legacy = t.__dlpack__()
    assert '"dltensor"' in repr(cap_legacy)
    assert dlpack.live_exports() == base + 2
    del cap  # never consumed: the capsule destructor calls the deleter
    assert _settle() == base + 1
    tl = torch.utils.dlpack.from_dlpack(cap_legacy)
    assert tl.data_ptr() == t.ptr
    assert "used_dltensor" in repr(cap_legacy)
    del cap_legacy
    assert _settle() == base + 1  # consumed: torch owns it now
    del tl
    assert _settle() == base


def test_import_from_torch_strided_and_values() -> None:
    x = torch.arange(12, dtype=torch.int64).reshape(3, 4)[:, 1:]
    k = Tensor.from_dlpack(x)
    assert k.ptr == x.data_ptr()
    assert k.shape == (3, 3) and k.strides == (4, 1) and not k.is_contiguous()
    np.testing.assert_array_equal(k.numpy(), x.numpy())
    y = x * 3 + 1  # a new torch buffer
    ky = Tensor.from_dlpack(y)
    assert ky.ptr == y.data_ptr()
    np.testing.assert_array_equal(ky.numpy(), y.numpy())


def test_round_trip_kinac_torch_kinac() -> None:
    a = np.linspace(-1, 1, 64, dtype=np.float32)
    t = Tensor.host(a)
    tt = torch.from_dlpack(t)
    back = Tensor.from_dlpack(tt)
    assert back.ptr == t.ptr == tt.data_ptr()
    r = torch.relu(tt)
    kr = Tensor.from_dlpack(r)
    assert kr.ptr == r.data_ptr()
    np.testing.assert_array_equal(kr.numpy(), np.maximum(a, 0))


def test_numpy_consumer_and_kinac_consumer() -> None:
    base = _settle()
    a = np.arange(6, dtype=np.float64)
    t = Tensor.host(a)
    n = np.from_dlpack(t)
    assert n.ctypes.data == t.ptr
    k = Tensor.from_dlpack(t)
    assert k.ptr == t.ptr and dlpack.live_exports() == base + 2
    del k
    assert _settle() == base + 1  # our consumer called our deleter
    del n
    assert _settle() == base


def test_copy_flag_and_readonly() -> None:
    a = np.arange(4, dtype=np.float32)
    t = Tensor.host(a)
    cap = t.__dlpack__(max_version=(1, 0), copy=True)
    k = Tensor.from_dlpack(cap)
    assert k.ptr != t.ptr
    np.testing.assert_array_equal(k.numpy(), a)
    t.readonly = True
    kr = Tensor.from_dlpack(t.__dlpack__(max_version=(1, 0)))
    assert kr.readonly


def test_errors() -> None:
    t = Tensor.host(np.zeros(2, dtype=np.float32))
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(2, 0))
    cap = t.__dlpack__()
    Tensor.from_dlpack(cap)
    with pytest.raises(BufferError, match="already consumed"):
        Tensor.from_dlpack(cap)
    with pytest.raises(BufferError, match="unsupported DLPack dtype"):
        Tensor.from_dlpack(torch.zeros(2, dtype=torch.complex64))


def test_bfloat16_and_zero_dim() -> None:
    b = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
    kb = Tensor.from_dlpack(b)
    assert kb.dtype.name == "bfloat16"
    np.testing.assert_array_equal(kb.numpy(), b.view(torch.int16).numpy().view(np.uint16))
    s = torch.tensor(3.5)
    ks = Tensor.from_dlpack(s)
    assert ks.shape == () and float(ks.numpy()) == 3.5
    back = torch.from_dlpack(ks)
    assert back.shape == () and float(back) == 3.5
