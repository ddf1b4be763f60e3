"""The determinism gate catches a planted nondeterministic kernel (issue 17 item 4), host and GPU.

The plant runs in the place of the MLP's first kernel (``x @ w1``) a reduction whose
summation order depends on a seed, as ``atomicAdd`` ordering would make it: the same sums,
rounded differently. Two runs with different seeds must be named as differing at kernel 0;
two with the same seed, and two of the default kernels, must agree bit for bit. The GPU half
also runs ``kinac run --deterministic --target cuda`` (record, compare with a manifest).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from observe_support import mlp_workspace

import kinac
from kinac.observe.determinism import first_difference, record_gpu, record_host
from kinac.observe.profile import loaded_entry

B, D, F = 16, 64, 96


def seeded_matmul(x: np.ndarray, w: np.ndarray, seed: int) -> np.ndarray:
    """``x @ w`` in float32, summed over k in an order drawn from ``seed``."""
    acc = np.zeros((x.shape[0], w.shape[1]), np.float32)
    for k in np.random.default_rng(seed).permutation(x.shape[1]):
        acc += x[:, k, None] * w[None, k, :]  # one rounding per term, in this order
    return acc


def _plant(x: np.ndarray, w1: np.ndarray, seed: int) -> Any:
    def plant(i: int, out: np.ndarray) -> bool:
        if i != 0:
            return False
        out[...] = seeded_matmul(x, w1, seed).reshape(out.shape)
        return True

    return plant


def _arrays() -> tuple[np.ndarray, ...]:
    r = np.random.default_rng(0)
    x = r.standard_normal((B, D)).astype(np.float32)
    w1 = (r.standard_normal((D, F)) / 8).astype(np.float32)
    w2 = (r.standard_normal((F, D)) / 8).astype(np.float32)
    return x, w1, w2


def _check_gate(record: Any, entry: Any, given: tuple[Any, ...], x: Any, w1: Any) -> None:
    base = record(entry, given, "g")
    assert first_difference(base, record(entry, given, "g")) is None  # default kernels: stable
    one, again = (record(entry, given, "g", _plant(x, w1, 1)) for _ in range(2))
    assert first_difference(one, again) is None  # the same order: the same bits
    two = record(entry, given, "g", _plant(x, w1, 2))
    why = first_difference(one, two)
    sym = one["kernels"][0]["sym"]
    assert why is not None and why.startswith(
        f"kernel 0 ({sym}, matmul f32[{B}, {F}]) is the first"
    )
    assert first_difference(base, one) is not None
    assert (first_difference(base, one) or "").startswith("kernel 0 (")
    # the plant computes the same product: its rounding differs, not its value
    a, b = one["kernels"][0]["sketch"]["values"], base["kernels"][0]["sketch"]["values"]
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_host_gate_names_a_planted_seed_ordered_reduction(tmp_path: Path) -> None:
    ws = mlp_workspace(tmp_path, b=B, d=D, f=F)
    fn = kinac.compile(ws, "mlp", no_cache=True)
    arrays = _arrays()
    fn(*arrays)
    entry, given = loaded_entry(fn, arrays, {})
    _check_gate(record_host, entry, given, arrays[0], arrays[1])


@pytest.mark.gpu
def test_gpu_gate_names_a_planted_seed_ordered_reduction(tmp_path: Path) -> None:
    from kinac.rt import cuda

    if not cuda.available():
        pytest.skip(f"no CUDA GPU ({cuda.unavailable_reason()})")
    ws = mlp_workspace(tmp_path, b=B, d=D, f=F)
    fn = kinac.compile(ws, "mlp", target="cuda", no_cache=True)
    arrays = _arrays()
    fn(*arrays)
    entry, given = loaded_entry(fn, arrays, {})
    _check_gate(record_gpu, entry, given, arrays[0], arrays[1])
    doc = record_gpu(entry, given, "g")
    assert all(k["cache_key"]["arch"].startswith("sm_") for k in doc["kernels"])
    assert doc["kernels"][0]["cache_key"]["tile"].startswith("cublas")


@pytest.mark.gpu
def test_kinac_run_deterministic_on_cuda(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kinac.cli import main
    from kinac.rt import cuda

    if not cuda.available():
        pytest.skip(f"no CUDA GPU ({cuda.unavailable_reason()})")
    ws = mlp_workspace(tmp_path, b=B, d=D, f=F)
    base = ["run", str(ws), "mlp", "--repeat", "1", "--target", "cuda", "--cache-dir", str(ws / ".c")]  # fmt: skip
    assert main([*base, "--deterministic"]) == 0
    assert "bit-identical to a second run" in capsys.readouterr().out
    man = ws / "m.json"
    assert main([*base, "--manifest", str(man)]) == 0
    assert re.search(r"recorded \d+ kernels to ", capsys.readouterr().out)
    assert main([*base, "--manifest", str(man)]) == 0
    assert "bit-identical to" in capsys.readouterr().out
