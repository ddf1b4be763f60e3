"""The host runtime: buffers and the execution of a compiled entry on the CPU.

``load_entry(lowered, object_code)`` returns a :class:`HostEntry`; calling it with numpy
arrays (or DLPack tensors) returns numpy arrays, which are DLPack producers themselves
(``torch.from_dlpack`` on them copies nothing). Runtime checks (a gather index out of range)
raise :class:`KinaRuntimeError`.
"""

from __future__ import annotations

from kinac.rt.host.arrays import OUTPUT_STATS
from kinac.rt.host.entry import HostEntry, load_entry
from kinac.rt.host.errors import KinaRuntimeError

__all__ = ["OUTPUT_STATS", "HostEntry", "KinaRuntimeError", "load_entry"]
