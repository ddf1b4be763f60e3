"""The CPU target's Python interop for 16-bit floats and torch tensors.

bf16 outputs are :class:`kinac.rt.host.Bf16Array`: ``torch.from_dlpack`` gives a bfloat16 tensor
sharing the memory (the regression: it used to give uint16 bit patterns), ``astype`` converts
values, ``np.asarray`` gives the bits. f16 round-trips as numpy float16. Torch CPU arguments are
read without a copy (``IMPORT_STATS.copies``, pointer equality)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kinac
from kinac.rt.host import IMPORT_STATS, Bf16Array, bf16_array

torch = pytest.importorskip("torch")

SRC = """(module bfi)
(defn dense [(x : (tensor T [B K])) (w : (tensor T [K N]))] -> (tensor T [B N])
  (matmul x w))
(defn scale [(x : (tensor T [N]))] -> (tensor T [N])
  (add x x))
"""


@pytest.fixture(scope="module")
def src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("interop") / "bfi.kina"
    p.write_text(SRC)
    return p


def _ref(x: object, w: object) -> object:
    return x.float() @ w.float()  # type: ignore[attr-defined]


def test_bf16_torch_dense_is_bfloat16_shared_and_close(src: Path) -> None:
    f = kinac.compile(src, "dense")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 16, generator=g).to(torch.bfloat16)
    w = torch.randn(16, 7, generator=g).to(torch.bfloat16)
    y = f(x, w)
    assert isinstance(y, Bf16Array)
    t = torch.from_dlpack(y)
    assert t.dtype == torch.bfloat16  # not uint16 bits (the leak this fixes)
    assert t.shape == (5, 7)
    assert t.data_ptr() == y.ctypes.data  # shares the memory
    torch.testing.assert_close(t.float(), _ref(x, w), rtol=2e-2, atol=2e-2)
    # numpy users: np.asarray is the bits (a view), astype converts the values
    bits = np.asarray(y)
    assert type(bits) is np.ndarray and bits.dtype == np.uint16
    assert np.shares_memory(bits, y)
    assert np.array_equal(bits, t.view(torch.int16).numpy().view(np.uint16))
    assert np.array_equal(y.astype(np.float32), t.float().numpy())
    assert np.array_equal(y.to_float32(), t.float().numpy())
    assert "dtype=bf16" in repr(y)
    # arithmetic on the bits returns plain arrays (nothing claims to be bf16 afterwards)
    assert type(y + 0) is np.ndarray


def test_bf16_output_feeds_back_and_hot_path_keeps_it(src: Path) -> None:
    f = kinac.compile(src, "scale")
    x = torch.randn(9).to(torch.bfloat16)
    for _ in range(4):  # full, fast, then hot path: the same output type each time
        y = f(x)
        assert isinstance(y, Bf16Array)
        assert torch.from_dlpack(y).dtype == torch.bfloat16
    assert f.hot_calls >= 1
    z = f(y)  # a Bf16Array argument is typed bf16
    assert torch.equal(torch.from_dlpack(z), (x * 4).to(torch.bfloat16))


def test_bf16_numpy_inputs_wrapped_bits_accepted_plain_uint16_refused(src: Path) -> None:
    f = kinac.compile(src, "scale")
    x = torch.randn(6).to(torch.bfloat16)
    bits = x.view(torch.int16).numpy().view(np.uint16).copy()
    y = f(bf16_array(bits))
    assert torch.equal(torch.from_dlpack(y), x + x)
    with pytest.raises(kinac.KinaCallError, match="uint16.*bf16_array"):
        f(bits)


def test_bf16_ml_dtypes_input(src: Path) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    f = kinac.compile(src, "scale")
    x = np.random.default_rng(1).standard_normal(6).astype(ml_dtypes.bfloat16)
    y = f(x)
    assert np.array_equal(y.astype(np.float32), (x.astype(np.float32) * 2))


def test_f16_round_trips_numpy_and_torch(src: Path) -> None:
    f = kinac.compile(src, "dense")
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 8)).astype(np.float16)
    w = rng.standard_normal((8, 4)).astype(np.float16)
    y = f(x, w)
    assert type(y) is np.ndarray and y.dtype == np.float16
    ref = x.astype(np.float32) @ w.astype(np.float32)
    np.testing.assert_allclose(y.astype(np.float32), ref, rtol=1e-2, atol=1e-2)
    yt = f(torch.from_numpy(x), torch.from_numpy(w))
    t = torch.from_dlpack(yt)
    assert t.dtype == torch.float16 and t.data_ptr() == yt.ctypes.data
    assert np.array_equal(yt, y)


def test_f32_outputs_stay_plain_numpy(src: Path) -> None:
    f = kinac.compile(src, "scale")
    y = f(np.arange(4, dtype=np.float32))
    assert type(y) is np.ndarray and y.dtype == np.float32


def test_torch_arguments_are_not_copied(src: Path) -> None:
    f = kinac.compile(src, "scale")
    before = IMPORT_STATS.copies
    for dt in (torch.float32, torch.bfloat16, torch.float16):
        x = torch.randn(8).to(dt)
        entry, _, _ = f.specialisation((x,), {})
        seen: list[int] = []
        real = entry._fn

        def spy(argv: object, real: object = real, seen: list[int] = seen) -> None:
            seen.append(argv[0])  # type: ignore[index]
            real(argv)  # type: ignore[operator]

        entry._fn = spy
        try:
            for _ in range(3):  # full, fast and hot paths
                f(x)
            if dt != torch.bfloat16:
                f(x.clone().requires_grad_(True))  # a leaf needing grad: read as is too
            assert seen[:3] == [x.data_ptr()] * 3  # the kernel read torch's own memory
        finally:
            entry._fn = real
    assert IMPORT_STATS.copies == before
    f(torch.randn(16)[::2])  # a strided tensor is copied, and counted
    assert IMPORT_STATS.copies == before + 1


def test_bf16_value_and_grad_and_sharded_return_bf16(tmp_path: Path) -> None:
    p = tmp_path / "vg.kina"
    p.write_text(
        SRC.replace("(module bfi)", "(module vg)")
        + "(defn loss [(x : (tensor T [B K])) (w : (tensor T [K N]))] -> (tensor T [])\n"
        + "  (sum (reshape (matmul x w) [(* B N)]) :axis 0))\n"
    )
    x = torch.randn(4, 8).to(torch.bfloat16)
    w = torch.randn(8, 3).to(torch.bfloat16)
    v, g = kinac.value_and_grad(p, "loss", wrt=["w"])(x, w)
    for a in (v, g["w"]):
        assert isinstance(a, Bf16Array) and torch.from_dlpack(a).dtype == torch.bfloat16
    dw = torch.from_dlpack(g["w"]).float()
    torch.testing.assert_close(dw, x.float().sum(0)[:, None].expand(8, 3), rtol=2e-2, atol=2e-2)
    y = kinac.compile(p, "dense", mesh=2)(x, w)
    assert isinstance(y, Bf16Array)
    torch.testing.assert_close(torch.from_dlpack(y).float(), _ref(x, w), rtol=2e-2, atol=2e-2)


def test_bf16_array_views_export_their_strides() -> None:
    b = torch.randn(3, 4).bfloat16()
    a = bf16_array(b.view(torch.int16).numpy().view(np.uint16))
    t = torch.from_dlpack(a.T)
    assert torch.equal(t, b.T) and t.data_ptr() == a.ctypes.data
    assert torch.equal(torch.from_dlpack(a[1:, ::2]), b[1:, ::2])
    assert a.view(np.int16).kina_dtype is None  # type: ignore[attr-defined]  # a reinterpreting view is no longer bf16
    with pytest.raises(kinac.KinaRuntimeError, match="uint16"):
        bf16_array(np.zeros(2, np.float32))
