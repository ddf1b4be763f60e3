"""Pickling (or copying) a compiled defn is a clear usage error saying what to do instead,
never "Can't pickle <function config_text ...>" from deep inside (the error before the fix)."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path

import pytest
from small_fixes_support import dense_file

import kinac
from kinac.api import NotPicklableError

__all__ = ["dense_file"]


def test_pickling_a_compiled_defn_says_to_compile_again(dense_file: Path) -> None:
    fn = kinac.compile(dense_file, "dense", no_cache=True)
    with pytest.raises(NotPicklableError) as e:
        pickle.dumps(fn)
    msg = str(e.value)
    assert "compiled function (`dense`, kinac.compile) cannot be pickled" in msg
    assert f"kinac.compile({str(dense_file)!r}, 'dense', target='cpu')" in msg
    assert "disk cache" in msg and "config_text" not in msg
    assert isinstance(e.value, TypeError) and isinstance(e.value, kinac.KinaUsageError)
    with pytest.raises(NotPicklableError):
        copy.copy(fn)
    grad = kinac.value_and_grad(dense_file, "dense", wrt=["w"], no_cache=True)
    with pytest.raises(NotPicklableError, match="`dense`"):
        pickle.dumps(grad, protocol=2)
