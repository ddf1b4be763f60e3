"""``kinac build --shardings``: the layout table per entry and the planned collectives."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_shard_propagate import MEGATRON, annotated_block

from kinac.cli import main


def test_build_shardings_prints_layouts_and_collectives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = annotated_block(tmp_path, MEGATRON)
    assert main(["build", str(ws), "--no-cache", "--shardings", "--color", "never"]) == 0
    out = capsys.readouterr().out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") > 3}
    assert "S(1)" in rows["wq"] and "S(0)" in rows["wo"] and " R " in rows["x"]
    assert "block_small: layouts over mesh `tp` (tp=2)" in out
    assert "block_small: 2 planned collectives" in out
    reduces = [line for line in out.splitlines() if "all-reduce" in line]
    assert len(reduces) == 2 and all("524,288" in r and "block.kina:" in r for r in reduces)
    assert "attention_small: no sharding annotation" in out  # an entry without annotations


def test_build_without_the_flag_prints_no_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = annotated_block(tmp_path, MEGATRON)
    assert main(["build", str(ws), "--no-cache", "--color", "never"]) == 0
    assert "planned collectives" not in capsys.readouterr().out


def test_editing_an_annotation_shows_in_build_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Removing `wd`'s annotation re-runs the entry's propagation (and `build --why` says it
    was the signature), while lowering is reused: the graph did not change."""
    ws = annotated_block(tmp_path, MEGATRON)
    cache = str(tmp_path / "cache")
    assert main(["build", str(ws), "--cache-dir", cache]) == 0
    block = ws / "block.kina"
    block.write_text(block.read_text().replace("[F D] @sharded(axis=0, mesh=tp)", "[F D]"))
    capsys.readouterr()
    assert main(["build", str(ws), "--cache-dir", cache, "--why", "--color", "never"]) == 0
    why = capsys.readouterr().out
    shard = [line for line in why.splitlines() if line.strip().startswith("shard_propagate(")]
    assert len(shard) == 1 and "<-  signature(DefnKey(file='block.kina', name='block'))" in shard[0]
    assert "lowered(" not in why and "object_code(" not in why
