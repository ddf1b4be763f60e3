"""The layout algebra against numpy: every view's layout addresses the elements numpy does."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kinac.ir.layout import Layout, as_blas_matrix


def offsets(lay: Layout) -> np.ndarray:
    """The element offset of every logical index, as an array of the layout's shape."""
    return np.array([lay.offset_of(i) for i in np.ndindex(*lay.shape)], dtype=np.int64).reshape(
        lay.shape
    )


@st.composite
def views(draw: st.DrawFn) -> tuple[np.ndarray, Layout | None]:
    """A numpy view chain (of an arange) and the layout kinac derives for it."""
    shape = tuple(draw(st.lists(st.sampled_from([1, 2, 3, 4, 6]), min_size=1, max_size=4)))
    arr = np.arange(math.prod(shape)).reshape(shape)
    lay: Layout | None = Layout.contiguous(shape)
    for _ in range(draw(st.integers(1, 5))):
        if lay is None:
            break
        kind = draw(st.sampled_from(["transpose", "reshape", "broadcast", "slice", "repeat"]))
        if kind == "transpose":
            perm = tuple(draw(st.permutations(range(arr.ndim))))
            arr, lay = arr.transpose(perm), lay.transpose(perm)
        elif kind == "reshape":
            n = arr.size
            a = draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
            new = (a, n // a) if draw(st.booleans()) else (n // a, 1, a)
            arr, lay = arr.reshape(new), lay.reshape(new)
        elif kind == "broadcast":
            new = (draw(st.integers(1, 3)),) + tuple(  # type: ignore[assignment]
                d if d != 1 else draw(st.integers(1, 3)) for d in arr.shape
            )
            arr, lay = np.broadcast_to(arr, new), lay.broadcast_to(new)
        elif kind == "slice":
            ax = draw(st.integers(0, arr.ndim - 1))
            s = draw(st.integers(0, arr.shape[ax] - 1))
            e = draw(st.integers(s + 1, arr.shape[ax]))
            sl = [slice(None)] * arr.ndim
            sl[ax] = slice(s, e)
            arr, lay = arr[tuple(sl)], lay.slice(ax, s, e)
        else:
            ax, r = draw(st.integers(0, arr.ndim - 1)), draw(st.integers(2, 3))
            arr, lay = np.repeat(arr, r, axis=ax), lay.repeat_interleave(ax, r)
    return arr, lay


@settings(max_examples=300, deadline=None)
@given(v=views())
def test_layouts_address_what_numpy_views_address(v: tuple[np.ndarray, Layout | None]) -> None:
    arr, lay = v
    if lay is None:
        return  # not expressible as a layout: the lowering copies instead (tested elsewhere)
    assert lay.shape == arr.shape
    np.testing.assert_array_equal(offsets(lay), arr)


def test_reshape_merges_and_splits() -> None:
    c = Layout.contiguous((4, 6))
    assert c.reshape((24,)) == Layout.contiguous((24,))
    t = c.transpose((1, 0))  # (6, 4) strides (1, 6)
    assert t.reshape((2, 3, 4)) is not None
    merged = t.reshape((24,))  # not contiguous: kept as two sub-dims
    assert merged is not None and merged.dims == (((6, 1), (4, 6)),)
    assert c.transpose((1, 0)).reshape((4, 6)) is None  # 4 does not split 6 evenly
    assert not t.is_contiguous() and c.is_contiguous()


def test_blas_matrix_views() -> None:
    c = Layout.contiguous((8, 5))
    assert as_blas_matrix(c) is not None and not as_blas_matrix(c).trans  # type: ignore[union-attr]
    t = as_blas_matrix(c.transpose((1, 0)))
    assert t is not None and t.trans and t.ld == 5
    assert as_blas_matrix(c.broadcast_to((3, 8, 5))) is not None  # batch stride 0 is fine
    assert as_blas_matrix(Layout.contiguous((8, 1)).broadcast_to((8, 5))) is None
    assert as_blas_matrix(c.repeat_interleave(1, 2)) is None  # stride-0 inner sub-dim
    heads = Layout.contiguous((2, 16, 4, 8)).transpose((0, 2, 1, 3))  # [B, H, S, Dh] view
    m = as_blas_matrix(heads)
    assert m is not None and not m.trans and m.ld == 32
