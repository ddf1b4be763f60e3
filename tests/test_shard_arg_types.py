"""The sharded call's argument types, remembered by form (kinac/api_sharded_types.py): every
answer equals ``kinac.api_types.arg_type``'s for the same argument, whatever was asked before at
the same call site (another shape, dtype, device, Python type, a host bf16 array), arguments
it refuses are refused every time, and a sharded entry called with another shape runs that
shape's program."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from kinac.api_sharded_types import ArgTypes
from kinac.api_types import arg_type
from kinac.errors import KinaCallError
from kinac.rt.host import bf16_array


class FakeDevice:
    """A DLPack producer that says where it lives (the cache must key on it)."""

    def __init__(self, shape: tuple[int, ...], kind: int, index: int) -> None:
        self.shape, self.dtype, self._dev = shape, np.dtype("float32"), (kind, index)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._dev


class ListShape:
    """An array-like whose shape does not hash (typed every call)."""

    def __init__(self, shape: list[int]) -> None:
        self.shape, self.dtype = shape, np.dtype("float64")


def forms() -> list[Any]:
    return [
        np.zeros((4, 8), np.float32),
        np.zeros((4, 8), np.float64),
        np.zeros((8, 4), np.float32),
        np.zeros((4, 8), np.int32),
        np.zeros((4, 8), ">f4"),
        np.zeros((4, 8), np.float32)[:, ::2],
        torch.zeros(4, 8),
        torch.zeros(4, 8, dtype=torch.bfloat16),
        torch.zeros(4, 8, dtype=torch.float16),
        bf16_array(np.zeros((4, 8), np.uint16)),
        FakeDevice((4, 8), 2, 0),
        FakeDevice((4, 8), 2, 1),
        FakeDevice((4, 8), 1, 0),
        ListShape([4, 8]),
        ListShape([8, 4]),
    ]


def test_remembered_types_equal_the_uncached_ones_in_any_order() -> None:
    """Every form of a list, in three random orders at one call site (the same ``ArgTypes``),
    twice each: each answer equals ``arg_type``'s for that argument."""
    rng = np.random.default_rng(11)
    cached = ArgTypes()
    items = forms()
    for _ in range(3):
        for i in [*rng.permutation(len(items)), *rng.permutation(len(items))]:
            x = items[i]
            assert cached([x], ["x"]) == (arg_type(x, "x"),), (i, x)
    assert cached([items[10]], ["x"])[0].device == "cuda:0"
    assert cached([items[11]], ["x"])[0].device == "cuda:1"


def test_refused_arguments_are_refused_every_time() -> None:
    """A dtype Kina does not have, or a DLPack device it does not take, raises its message on
    every call (nothing remembered), and does not disturb an accepted form."""
    cached = ArgTypes()
    good = np.zeros((2, 3), np.float32)
    for bad, says in [
        (np.zeros((2, 3), np.uint16), "dtype uint16"),
        (FakeDevice((2, 3), 9, 0), "DLPack device type 9"),
        ([1.0, 2.0], "must be an array"),
    ]:
        for _ in range(2):
            with pytest.raises(KinaCallError, match=says):
                cached([good, bad], ["a", "b"])
        assert cached([good], ["a"]) == (arg_type(good, "a"),)
