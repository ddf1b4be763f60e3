"""Target descriptions: what object code is compiled for (part of every cache key)."""

from __future__ import annotations

from kinac.rules.codec import record

NVPTX_TRIPLE = "nvptx64-nvidia-cuda"  # the LLVM triple of every GPU module kinac writes


@record
class TargetSpec:
    """An LLVM target: triple, CPU name and feature string (``+avx2,+fma,...``).

    ``kind`` is ``"host"`` for object code the host runtime loads; a GPU target would be
    ``"nvptx"`` with ``sm_90``-style CPUs, compiled by the same :func:`compile_object` path.
    """

    triple: str
    cpu: str
    features: str
    kind: str = "host"
