"""How a cuBLAS call is issued when autotuning chose it (issue 14): plain data, no pickle.

A :class:`~kinac.artifacts.gpu.GpuGemm` without an ``algo`` is bound as it always was
(classic cuBLAS; cuBLASLt's first heuristic answer for an epilogue). With one, the runtime
(:meth:`kinac.rt.cuda.blas.Blas.bind`) issues it the way :attr:`GemmAlgo.how` says:

- ``today``: as without a choice (it was timed and nothing beat it; the times are kept for
  the benchmark's table);
- ``lt``: one ``cublasLtMatmul`` (batched through strided layouts where the GEMM has a batch)
  with the stored algorithm;
- ``split``: a grouped ``pointers`` call as one ``cublasGemmEx`` per member, on the stream;
- ``split-lt``: the same, each member a ``cublasLtMatmul`` with the stored algorithm;

and, for a grouped ``lt`` choice, ``alt_*``: what to issue where the caller's tensors do not
lie at one stride (:attr:`GemmAlgo.alt`).

``algo`` is cuBLASLt's ``cublasLtMatmulAlgo_t`` (64 opaque bytes) as its heuristic returned
it, at position ``index`` of the top-N list. The runtime re-validates it with
``cublasLtMatmulAlgoCheck`` when it binds the entry (a newer cuBLAS, another GPU) and binds
the call as it would without a choice if the check fails.
"""

from __future__ import annotations

from kinac.rules.codec import record

ALGO_BYTES = 64  # sizeof(cublasLtMatmulAlgo_t)


@record
class GemmAlgo:
    """The timed choice for one GEMM: how it is issued, the algorithm, and the times (ms per
    call) of the choice and of today's binding, measured together."""

    how: str  # today | lt | split | split-lt
    algo: bytes = b""
    index: int = -1  # position in cuBLASLt's heuristic list (-1: none)
    ms: float = 0.0
    base_ms: float = 0.0
    # a grouped ``pointers`` call chosen as ``lt`` is one strided batch only where the caller's
    # tensors happen to lie at one stride in the order of the outputs (the gate and up weights
    # were allocated in either order on the H200, 2026-12-02); elsewhere the runtime issues
    # this, the fastest way that does not depend on addresses (``split``/``split-lt``), rather
    # than today's pointer-array call; "" when none beat today's
    alt_how: str = ""
    alt_algo: bytes = b""
    alt_index: int = -1

    @property
    def label(self) -> str:
        """A short name for tables: ``lt#3``, ``split-lt#0``, ``split``, ``today``."""
        return f"{self.how}#{self.index}" if self.index >= 0 else self.how

    @property
    def alt(self) -> GemmAlgo | None:
        """The stored alternative (see ``alt_how``) as a choice of its own, or None."""
        return GemmAlgo(self.alt_how, self.alt_algo, self.alt_index) if self.alt_how else None


@record
class GemmTuned:
    """``gemm_algo``'s value: the choice (None: today's, untimed) and what was timed."""

    how: str  # timed | default | off | skipped
    algo: GemmAlgo | None = None
    times: tuple[tuple[str, float], ...] = ()
