"""How large a tensor kinac compiles: the size and rank limits, checked at specialisation
(K0806).

Why: dims are arbitrary positive integers, so an entry at concrete dims can ask for a tensor
whose element count passes 2^63, whose byte size numpy refuses, or whose offsets overflow the
64-bit index arithmetic of the generated code. Those used to surface as an xDSL
``VerifyException``, a numpy ``ValueError`` or an ``OverflowError`` from deep inside a later
stage. Specialisation checks every tensor it creates (parameters and primitive results) against
:data:`MAX_TENSOR_BYTES` and reports the first one past it at its source, with its size,
before anything is lowered or allocated. 2^62 bytes (4 EiB) keeps every offset, every sum of
two offsets and every loop bound of the host code inside a signed 64-bit integer; the GPU
lowering picks 64-bit index arithmetic per kernel once a buffer reaches 2^30 elements
(docs/language.md, "Sizes").
"""

from __future__ import annotations

from kinac.check.codes import at, error
from kinac.diag.model import Diagnostic
from kinac.dtypes import ITEMSIZE
from kinac.tir.graph import TType

MAX_TENSOR_BYTES = 2**62
# numpy's NPY_MAXDIMS and what DLPack producers such as torch accept: an entry whose tensor has
# more axes builds, but no array can be passed to it or returned from it (numpy raised
# "maximum supported dimension for an ndarray is currently 64" in `kinac run`).
MAX_RANK = 64


def nbytes(t: TType) -> int:
    """The byte size of a tensor of type ``t`` (exact: Python integers do not overflow)."""
    return t.numel * ITEMSIZE.get(t.dtype, 8)


def _pow2(n: int) -> str:
    p = n.bit_length() - 1
    return f"2^{p}" if n == 1 << p else f"about 2^{p}"


def too_large(t: TType, what: str, file: str, defn: str, nid: int) -> Diagnostic | None:
    """K0806 when a tensor of type ``t`` (``what``: the parameter or primitive that makes it)
    reaches :data:`MAX_TENSOR_BYTES` or has more than :data:`MAX_RANK` axes; None when it fits."""
    if len(t.shape) > MAX_RANK:
        return error(
            "K0806",
            f"{what} is a tensor {t.dtype} of {len(t.shape)} axes: past kinac's limit of "
            f"{MAX_RANK} axes per tensor",
            at(file, defn, nid),
            notes=("arrays in and out of an entry are numpy or DLPack arrays, at most 64-D",),
            help="merge axes with `reshape`",
        )
    size = nbytes(t)
    if size < MAX_TENSOR_BYTES:
        return None
    shape = " ".join(str(d) for d in t.shape)
    return error(
        "K0806",
        f"{what} is a tensor {t.dtype}[{shape}] of {t.numel} elements, {size} bytes "
        f"({_pow2(size)}): past kinac's limit of 2^62 bytes per tensor",
        at(file, defn, nid),
        notes=(
            "offsets into a tensor are 64-bit integers; kinac refuses the entry here, "
            "before anything is lowered or allocated",
        ),  # fmt: skip
        help="build the entry at smaller dims",
    )
