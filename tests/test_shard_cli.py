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


def test_build_lists_the_per_device_program_and_its_segments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sharded entry's build lowers what `--simulate` runs: its per-device program and each
    segment's object code are artifacts (the entry without annotations has none)."""
    import json

    ws = annotated_block(tmp_path, MEGATRON)
    assert main(["build", str(ws), "--no-cache", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    kinds: dict[str, list[str]] = {}
    for a in doc["artifacts"]:
        kinds.setdefault(a["entry"], []).append(a["kind"])
    # Megatron: 2 all-reduces cut the block into 3 segments
    assert kinds["block_small"] == [
        "graph",
        "llvm-ir",
        "object",
        "device-program",
        "segment0-object",
        "segment1-object",
        "segment2-object",
    ]
    assert "device-program" not in kinds["attention_small"]
    ran = {e["query"] for e in doc["executed"]}
    assert {"device_program", "segment_lowered", "segment_object"} <= ran


def test_build_reports_a_segment_lowering_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lowering failure of a sharded entry's segment is caught by `kinac build` (an internal
    error naming the entry's segment), not first by `kinac run --simulate`."""
    import kinac.ir.host.kernels as kernels

    real = kernels.split_graph

    def broken(graph):  # type: ignore[no-untyped-def]
        if ".seg" in graph.name:
            raise RuntimeError("segment lowering broke")
        return real(graph)

    monkeypatch.setattr(kernels, "split_graph", broken)
    ws = annotated_block(tmp_path, MEGATRON)
    rc = main(["build", str(ws), "--no-cache", "--color", "never"])
    out = capsys.readouterr()
    text = out.out + out.err
    assert rc != 0, text
    assert "block.seg0" in text and "host lowering (segment)" in text, text
