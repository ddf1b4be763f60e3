"""Typing hygiene that mypy alone would let slip: context managers that return ``self`` say
``Self``, so ``with Store(...) as s`` is a :class:`~kinac.rules.store.Store` to the type checker
(CI runs mypy over ``tests/`` too, so the body below is itself checked)."""

from __future__ import annotations

import typing
from pathlib import Path

from kinac.rules.cache_files import CacheFiles
from kinac.rules.store import Store


def test_cache_files_enter_returns_self_type() -> None:
    """``CacheFiles.__enter__`` is annotated ``Self``: annotated ``CacheFiles``, mypy typed
    ``with Store(...) as s`` as the base class and rejected every memo method on ``s``."""
    assert typing.get_type_hints(CacheFiles.__enter__)["return"] is typing.Self


def test_store_as_context_manager_is_a_store(tmp_path: Path) -> None:
    with Store(tmp_path / "cache", 1 << 20) as s:
        assert isinstance(s, Store)
        s.save_setting("hygiene", 1)  # a Store method: a type error if ``s`` were CacheFiles
        assert s.load_setting("hygiene") == 1
