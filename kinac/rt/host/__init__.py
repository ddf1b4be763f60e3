"""The host runtime: buffers and the execution of a compiled entry on the CPU.

``load_entry(lowered, object_code)`` returns a :class:`HostEntry`; calling it with numpy
arrays (or DLPack tensors) returns numpy arrays, which are DLPack producers themselves
(``torch.from_dlpack`` on them copies nothing); bf16 outputs are :class:`Bf16Array` arrays, whose
``__dlpack__`` says bfloat16. Runtime checks (a gather index out of range)
raise :class:`KinaRuntimeError`.
"""

from __future__ import annotations

from kinac.rt.host.arrays import IMPORT_STATS, OUTPUT_STATS, Bf16Array, bf16_array
from kinac.rt.host.entry import HostEntry, load_entry
from kinac.rt.host.errors import KinaRuntimeError

__all__ = [
    "IMPORT_STATS",
    "OUTPUT_STATS",
    "Bf16Array",
    "bf16_array",
    "HostEntry",
    "KinaRuntimeError",
    "load_entry",
]
