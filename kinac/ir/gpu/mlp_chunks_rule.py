"""When the GPU lowering runs a SwiGLU MLP in row chunks, and how many (issue 14).

Pure arithmetic on shapes (unit-tested on the CPU), read by :mod:`kinac.ir.gpu.mlp_chunks`.
A chunk of ``R`` rows keeps its gate and up products (``2 R F`` elements) small enough for
the H200's L2 to still hold them when the ``silu * mul`` map reads them; see the module
``mlp_chunks`` and docs/gpu.md, "The MLP in L2 (issue 14)", for the measurements.
"""

from __future__ import annotations

# the gate+up products of one chunk (bytes): at most this much (the H200's L2 is 50 MiB and
# the weights the products stream through it take their share)
CHUNK_BYTES = 24 * 2**20
# below this many bytes of gate+up products the MLP is left whole: it fits L2 already, or
# the launches chunks add cost more than the traffic they save
MIN_BYTES = 64 * 2**20
# a chunk keeps at least this many rows: fewer and cuBLAS's tiles (128-256 rows) leave SMs idle
MIN_ROWS = 1024
MAX_CHUNKS = 8
CHUNK_DTYPES = ("bf16", "f16")


def mlp_chunks(rows: int, f: int, itemsize: int, dtype: str) -> int:
    """How many row chunks an MLP of ``rows`` rows and ``f`` hidden features runs in (1: whole).

    The fewest chunks (a power of two dividing ``rows``) whose gate+up products fit
    :data:`CHUNK_BYTES`, each at least :data:`MIN_ROWS` rows; 1 when the products are under
    :data:`MIN_BYTES` or the dtype is not a half type (the f32 products are compute-bound
    at eight times the time: the map's traffic is a small share)."""
    whole = 2 * rows * f * itemsize
    if dtype not in CHUNK_DTYPES or whole < MIN_BYTES:
        return 1
    c = 2
    while c <= MAX_CHUNKS and rows % c == 0 and rows // c >= MIN_ROWS:
        if whole // c <= CHUNK_BYTES:
            return c
        c *= 2
    return 1


def slice_axis(lead: tuple[int, ...], chunk_rows: int) -> tuple[int, int] | None:
    """The axis of the leading dims ``lead`` (rows = their product) to slice ``chunk_rows``
    rows at a time, and the slice's length along it: the first axis of size > 1, when a chunk
    is a whole number of its steps and it is a whole number of chunks (``None``: no such
    axis, the MLP stays whole)."""
    for a, n in enumerate(lead):
        if n == 1:
            continue
        inner = 1
        for m in lead[a + 1 :]:
            inner *= m
        if chunk_rows % inner == 0 and (n * inner) % chunk_rows == 0:
            return a, chunk_rows // inner
        return None
    return None
