"""``docs/architecture.md``'s stage diagram names registered queries only (it said the sharding
plan was not lowered long after ``device_program`` lowered it: keep the text in step)."""

from __future__ import annotations

import re
from pathlib import Path

import kinac.pipeline  # noqa: F401  (registers every query, the sharded ones included)
from kinac.rules.query import lookup

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
NOT_QUERIES = {"source_text", "host_piece", "host", "runtime", "kinac", "rt", "cuda", "specialise"}


def test_the_diagram_names_registered_queries() -> None:
    diagram = DOC.read_text().split("```")[1]
    words = set(re.findall(r"\b[a-z][a-z0-9_]*\b", diagram)) - NOT_QUERIES
    snake = {w for w in words if "_" in w}
    assert {"shard_propagate", "device_program", "segment_lowered", "segment_ptx"} <= snake
    missing = sorted(w for w in snake | {"parse", "lowered", "ptx", "build"} if lookup(w) is None)
    assert missing == [], missing


def test_the_text_says_the_plan_is_lowered() -> None:
    text = DOC.read_text()
    assert "the sharded\nlowering consumes its plan" in text
    assert lookup("device_program") is not None and lookup("grad_device_program") is not None
