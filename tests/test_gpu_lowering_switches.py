"""The GPU lowering's measuring switches (``KINAC_SMALL_GEMM*``) are an input of the lowering
queries (``gpu_lowering_switches``): a build under one switch and a later build under another,
sharing a cache, must not share the lowering (before, the second reused the first's memo)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kinac.session import Session

SRC = """(defn f [(x : (tensor bf16 [512 256])) (w : (tensor bf16 [256 256]))]
  -> (tensor bf16 [512 256])
  (add x (matmul x w)))
"""
TOML = """[workspace]
name = "sw"
sources = ["*.kina"]

[target]
kind = "cuda"

[[entry]]
name = "f"
defn = "f"
"""


def _build(ws: Path, cache: Path) -> tuple[list[str], list[str]]:
    """The entry's launch notes, and the lowering queries that ran in this session."""
    from kinac import pipeline_gpu
    from kinac.pipeline import EntryKey, config, find_defn, target

    sess = Session(ws, cache_dir=str(cache), target="cuda")
    try:
        assert sess.build().error_count == 0
        cfg = config(sess.db, ()).config
        (e,) = cfg.entries  # type: ignore[union-attr]
        (found,) = find_defn(sess.db, (e.defn, e.file))
        key = EntryKey(found.file, e.defn, e.dims, e.dtypes, target(sess.db, ()).kind)
        lo = pipeline_gpu.gpu_lowered(sess.db, key)
        notes = [s.launches[0].note if s.launches else s.sym for s in lo.steps]
        ran = [n for n, _ in sess.db.events.executed_names(None) if n == "gpu_piece"]
        return notes, ran
    finally:
        sess.close()


def test_a_changed_switch_relowers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "f.kina").write_text(SRC)
    (ws / "kina.toml").write_text(TOML)
    cache = tmp_path / "cache"
    monkeypatch.delenv("KINAC_SMALL_GEMM", raising=False)
    notes, ran = _build(ws, cache)
    assert any(n.startswith("tc ") for n in notes) and ran, notes  # the generated GEMM
    notes, ran = _build(ws, cache)
    assert any(n.startswith("tc ") for n in notes) and not ran  # same switches: from the store
    monkeypatch.setenv("KINAC_SMALL_GEMM", "0")
    notes, ran = _build(ws, cache)
    assert not any(n.startswith("tc ") for n in notes) and ran, notes  # re-lowered: cuBLAS
