"""An argument's Kina type is read from numpy, torch and kinac's own runtime tensors alike: a
kinac output passed back into a compiled defn (the natural way to chain calls) must bind."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kinac.api_types import arg_type
from kinac.rt.cuda.tensor import Tensor


@pytest.mark.parametrize(
    ("np_dtype", "kina"),
    [
        ("float32", "f32"),
        ("float64", "f64"),
        ("float16", "f16"),
        ("int64", "i64"),
        ("int32", "i32"),
        ("bool", "bool"),
    ],
)
def test_kinac_runtime_tensor_binds_like_numpy(np_dtype: str, kina: str) -> None:
    a = np.zeros((2, 3), dtype=np_dtype)
    t = Tensor.host(a)
    assert arg_type(t, "x") == arg_type(a, "x")
    assert arg_type(t, "x").dtype == kina
    assert arg_type(torch.from_numpy(a), "x") == arg_type(a, "x")


def test_bf16_runtime_tensor_and_torch_agree() -> None:
    t = Tensor.host(np.zeros((4,), dtype=np.uint16))
    t.dtype = type(t.dtype)("bfloat16", 4, 16)  # a bf16 view of the same bits
    assert arg_type(t, "x").dtype == "bf16"
    assert arg_type(torch.zeros(4, dtype=torch.bfloat16), "x").dtype == "bf16"
