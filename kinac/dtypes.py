"""The dtypes of Kina and their sizes: one home for facts every layer needs.

Why a module of its own: the checker (tensor size limits), the concrete graph, the host and GPU
lowerings and the runtime all need the dtype names, which are floats and how many bytes an
element takes; written in each, the copies drift. It imports nothing, so every layer may use it
(``tests/test_layers.py`` lets any package import it and checks each name is defined only here).
"""

from __future__ import annotations

DTYPES = ("f64", "f32", "f16", "bf16", "i64", "i32", "bool")
FLOAT_DTYPES = ("f64", "f32", "f16", "bf16")
ITEMSIZE = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "bool": 1}
