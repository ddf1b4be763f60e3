"""Mesh names declared more than once: in kina.toml's [[mesh]] (a configuration error naming
both entries), and across files or with kina.toml when no annotation uses the name (K0702 once
per file that sees both declarations; it was not reported at all)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kinac.cli import main
from kinac.workspace.schema import validate

TWO = '[[mesh]]\nname = "tp"\nshape = [2]\n'
FOUR = '[[mesh]]\nname = "tp"\nshape = [4]\n'
DEFN = "(defn f [(x : (tensor f32 [N]))] -> (tensor f32 [N]) (neg x))\n"


def test_two_equal_mesh_names_in_kina_toml_are_a_config_error_naming_both() -> None:
    r = validate(TWO + '[[mesh]]\nname = "dp"\nshape = [2]\n' + FOUR, "w")
    assert r.config is None
    assert [(e.key, e.message) for e in r.errors] == [
        ("mesh[2].name", "mesh name 'tp' is used twice: mesh[0] and mesh[2]")
    ]


def test_repeated_axis_names_and_entry_names_in_kina_toml_are_errors() -> None:
    r = validate('[[mesh]]\nname = "g"\nshape = [2, 2]\naxes = ["a", "a"]\n', "w")
    assert [(e.key, e.message) for e in r.errors] == [
        ("mesh[0].axes[1]", "axis name 'a' is used twice: mesh[0].axes[0] and mesh[0].axes[1]")
    ]
    e = '[[entry]]\nname = "e"\ndefn = "f"\n'
    r = validate(e + e, "w")
    assert [x.message for x in r.errors] == ["entry name 'e' is used twice: entry[0] and entry[1]"]


def _check(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[dict]]:  # type: ignore[type-arg]
    rc = main(["check", str(root), "--format", "json", "--cache-dir", str(root / ".c")])
    out = capsys.readouterr().out
    doc = json.loads(out)
    diags = doc["diagnostics"] if isinstance(doc, dict) else doc
    return rc, diags


def test_an_unused_clash_is_k0702_once_per_file_that_sees_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "kina.toml").write_text('[workspace]\nname = "w"\n' + FOUR)
    (tmp_path / "lib.kina").write_text("(mesh tp [2])\n" + DEFN)
    (tmp_path / "user.kina").write_text('(import "lib.kina")\n' + DEFN.replace("f", "g"))
    (tmp_path / "other.kina").write_text(DEFN.replace("f", "h"))
    rc, diags = _check(tmp_path, capsys)
    assert rc == 1
    clashes = [d for d in diags if d["code"] == "K0702"]
    seen_by = sorted(d["message"].split("among what `")[1].split("`")[0] for d in clashes)
    assert seen_by == ["lib.kina", "user.kina"], clashes  # other.kina sees only kina.toml's
    for d in clashes:
        assert "mesh `tp` is declared 2 times" in d["message"]
        assert any("kina.toml" in n for n in d["notes"])
        assert (d["primary"]["file"], d["primary"]["line"]) == ("lib.kina", 1)


def test_a_clash_an_annotation_uses_is_reported_at_the_annotation_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "kina.toml").write_text('[workspace]\nname = "w"\n' + FOUR)
    (tmp_path / "lib.kina").write_text(
        "(mesh tp [2])\n(defn f [(x : (tensor f32 [N] @sharded(0, tp)))] -> (tensor f32 [N]) x)\n"
    )
    rc, diags = _check(tmp_path, capsys)
    assert rc == 1
    clashes = [d for d in diags if d["code"] == "K0702"]
    assert len(clashes) == 1 and "where `f` is checked" in clashes[0]["message"]
