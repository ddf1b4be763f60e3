"""What a runtime entry's bound call answers when it will not run the call (issue 14/17: a call
that costs nothing).

Why a module of its own: ``kinac.compile``'s hot path (``kinac/api.py``) compares the answer of
a GPU entry's bound call (``entry.hot_path(arrays)``) with :data:`MISS` on every call, so the
sentinel is a module global imported at load time, and this module imports nothing (the
runtime's packages load their heavy dependencies on use).

A bound call that checks the form of some arrays itself (a staged entry: its host arrays' shape
and dtype, read on every call to stage them anyway) lists their positions in its ``vouched``
attribute; the caller then does not read those arrays' state, and the bound call answers
:data:`MISS` (nothing run) when one of them changed form, so the caller's full path binds the
call again (a reshaped array may be another specialisation, or an error naming it).
"""

from __future__ import annotations

import os
from typing import Any

MISS: Any = object()

# The lean call paths of 2026-12-02d (docs/runtime.md "What a hot call costs"): returned outputs
# nobody holds reused as they are, the bound calls' records of their last launch (a device
# call's graph, a staged call's turn), host arrays vouched for by the staged bound call. Off
# (KINAC_LEAN_CALLS=0, or False here before the calls are bound again) is the path before them,
# for the benches' same-run A/B; both are correct.
LEAN = os.environ.get("KINAC_LEAN_CALLS", "1") != "0"

# Launch first (issue 14, 2026-12-02e: docs/call_path.md "Launch first"): a hot call of a GPU
# entry's bound graph launches as soon as it knows which graph and output block (the same
# argument objects, the entry's memo, the context, a free output), and compares the arrays'
# addresses and torch versions after the launch, while the GPU runs it; a mismatch found then
# redoes the call on the general path (the launch read memory the imports still hold into an
# output nobody holds). Off (KINAC_LAUNCH_FIRST=0, or False here before the calls are bound):
# every check before the launch, as before; both are correct.
LAUNCH_FIRST = os.environ.get("KINAC_LAUNCH_FIRST", "1") != "0"
