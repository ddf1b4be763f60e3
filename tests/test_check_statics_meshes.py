"""Mesh declarations: a name declared twice in one file (K0128, reader) or seen twice by a
file, through an import or kina.toml's [[mesh]] (K0702, where an annotation uses it), is an
error naming every declaration; it silently took the last one."""

from __future__ import annotations

import json
from pathlib import Path

from cli_support import kinac_process

from kinac.check import DefnRef
from kinac.check.env import InMemoryEnv
from kinac.diag.model import NodeRef, Span
from kinac.reader.parse import parse_file

USE = "(defn f [(x : (tensor f32 [N] @sharded(axis=0, mesh=tp)))] -> (tensor f32 [N]) x)\n"


def test_a_mesh_declared_twice_in_one_file_is_k0128_naming_both() -> None:
    pf = parse_file("m.kina", "(mesh tp [2])\n(mesh tp [4])\n" + USE)
    assert [d.code for d in pf.diagnostics] == ["K0128"]
    d = pf.diagnostics[0]
    assert isinstance(d.primary.loc, Span) and d.primary.loc.line == 2
    assert [s.loc.line for s in d.secondary if isinstance(s.loc, Span)] == [1]
    assert [(m.name, m.shape) for m in pf.meshes] == [("tp", (2,))]
    assert pf.meshes[0].file == "m.kina"


def test_a_mesh_seen_twice_through_an_import_is_k0702_at_the_use() -> None:
    env = InMemoryEnv.from_sources(
        {"lib.kina": "(mesh tp [2])\n", "m.kina": '(import "lib.kina")\n(mesh tp [4])\n' + USE}
    )
    ds = env.checked(DefnRef("m.kina", "f")).diagnostics
    assert [d.code for d in ds] == ["K0702"]
    where = {(s.loc.file, s.loc.defn) for s in ds[0].secondary if isinstance(s.loc, NodeRef)}
    assert where == {("lib.kina", ""), ("m.kina", "")}
    alone = InMemoryEnv.from_sources({"m.kina": "(mesh tp [4])\n" + USE})
    assert alone.checked(DefnRef("m.kina", "f")).diagnostics == ()


def test_a_source_mesh_clashing_with_kina_toml_is_k0702(tmp_path: Path) -> None:
    (tmp_path / "kina.toml").write_text(
        '[workspace]\nname = "m"\n[[mesh]]\nname = "tp"\nshape = [8]\n'
    )
    (tmp_path / "m.kina").write_text("(mesh tp [2])\n" + USE)
    p = kinac_process("check", str(tmp_path), "--format", "json")
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert "K0702" in p.stdout and "kina.toml" in p.stdout
    assert json.loads(p.stdout)
