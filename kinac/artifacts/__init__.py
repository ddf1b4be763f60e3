"""Artifacts: the records the compiler hands to the runtime, and nothing else.

Why: the runtime (:mod:`kinac.rt`) executes lowered entries without importing the compiler.
The records it reads (a host :class:`~kinac.artifacts.host.LoweredEntry` with its steps and
status codes, a GPU :class:`~kinac.artifacts.gpu.GpuLoweredEntry` with its launches and GEMM
descriptors) live here, between the two: the IR passes build them, the runtime reads them, the
engine caches them. Plain ``@record`` data: this package imports only the codec.
"""
