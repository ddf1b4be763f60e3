"""``kinac train --json`` lines are written whole: the ranks of ``kinac launch --all-ranks``
share one stdout, and a line written in two pieces could be split by another rank's line (the
fresh-clone CI run of 2026-12-01 read ``{...}{...}`` from test_launch_train)."""

from __future__ import annotations

import io
import json
import sys

import pytest

from kinac.train import cli as train_cli


class _Writes(io.StringIO):
    """A stdout that records each ``write`` call, as an unbuffered pipe sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def write(self, s: str) -> int:
        self.calls.append(s)
        return super().write(s)


def test_a_json_line_is_one_write_with_its_newline(monkeypatch: pytest.MonkeyPatch) -> None:
    out = _Writes()
    monkeypatch.setattr(sys, "stdout", out)
    doc = {"event": "step", "step": 2, "loss": 4.43, "rank": 1}
    train_cli._json_line(doc)
    assert len(out.calls) == 1 and out.calls[0].endswith("\n")
    assert json.loads(out.calls[0]) == doc
    print(json.dumps(doc), flush=True)  # what it replaced: the newline comes as a second write
    assert len(out.calls) == 3
