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

from typing import Any

MISS: Any = object()
