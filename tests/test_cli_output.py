"""What the CLI prints: JSON that carries everything the text does, counts in plain English,
``--why`` without repetition, and ``kina.toml`` errors in the file's own terms."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kinac.cli import main

ROOT = Path(__file__).resolve().parent.parent
LETS = (
    "(defn f [(x : (tensor f32 [N]))] -> (tensor f32 [N])\n"
    "  (let [(y (add x x)) (z (mul y x))] z))\n"
)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(list(args))
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return rc, out.out, out.err


@pytest.fixture()
def mlp(tmp_path: Path) -> Path:
    ws = tmp_path / "mlp"
    shutil.copytree(ROOT / "workspaces" / "mlp", ws, ignore=shutil.ignore_patterns(".kinac-cache"))
    return ws


def test_check_types_as_json_keeps_the_types(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "f.kina"
    src.write_text(LETS)
    rc, text, _ = run(capsys, "check", str(src), "--types", "--no-cache")
    assert rc == 0 and "y : " in text
    rc, out, _ = run(capsys, "check", str(src), "--types", "--format", "json", "--no-cache")
    doc = json.loads(out)
    assert rc == 0 and doc["diagnostics"] == []
    (f,) = doc["types"]
    assert f["file"] == "f.kina" and f["defn"] == "f" and f["typed"] is True
    assert [b["name"] for b in f["bindings"]] == ["y", "z"]
    assert all(b["type"] and b["type"] in text for b in f["bindings"]) and f["result"] in text
    rc, out, _ = run(capsys, "check", str(src), "--format", "json", "--no-cache")
    assert json.loads(out) == []  # without --types: still the plain list of diagnostics


def test_counts_are_pluralised(
    mlp: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = str(tmp_path / "c")
    rc, _, err = run(capsys, "build", str(mlp), "--cache-dir", cache)
    assert rc == 0 and "built 1 file, 3 artifacts" in err and "1 files" not in err
    (mlp / "kina.toml").write_text(
        (mlp / "kina.toml").read_text().replace("[target]", "[solver]\nbudget_ms = 1999\n[target]")
    )
    rc, _, err = run(capsys, "build", str(mlp), "--cache-dir", cache)
    assert rc == 0 and ("queries run" in err or "1 query run" in err) and "1 queries" not in err


def test_why_says_when_nothing_reran_and_does_not_repeat_chains(
    mlp: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = str(tmp_path / "c")
    assert run(capsys, "build", str(mlp), "--cache-dir", cache)[0] == 0
    rc, out, _ = run(capsys, "build", str(mlp), "--why", "--cache-dir", cache)
    assert rc == 0 and out.startswith("nothing re-ran: no input changed since the last build")
    src = mlp / "mlp.kina"
    src.write_text(src.read_text().replace("(add (matmul x w) bias)", "(add bias (matmul x w))"))
    rc, out, _ = run(capsys, "build", str(mlp), "--why", "--cache-dir", cache)
    lines = out.splitlines()
    assert lines[0].startswith("source_text(mlp.kina) changed; re-ran ")
    assert "  parse(mlp.kina)  <-  source_text(mlp.kina)" in lines
    # each line names one query and the one dependency that made it re-run
    assert all(line.count("  <-  ") <= 1 for line in lines) and len(set(lines)) == len(lines)


@pytest.mark.parametrize(
    ("toml", "key", "said"),
    [
        (
            'dims = { B = "four", S = 1, D = 2, F = 3 }',
            "entry[0].dims.B",
            'dimension B takes a positive integer, e.g. B = 128; got "four" (a string)',
        ),
        (
            "dims = { B = 1.5, S = 1, D = 2, F = 3 }",
            "entry[0].dims.B",
            "dimension B takes a positive integer, e.g. B = 128; got 1.5 (a float)",
        ),
        (
            'dims = { B = 1, S = 1, D = 2, F = 3 }\ndtypes = { T = "f99" }',
            "entry[0].dtypes.T",
            "expected one of 'f64', 'f32', 'f16', 'bf16', 'i64', 'i32' or 'bool'; got \"f99\" (a string)",
        ),
    ],
)
def test_kina_toml_errors_in_its_own_terms_and_as_json(
    mlp: Path, capsys: pytest.CaptureFixture[str], toml: str, key: str, said: str
) -> None:
    cfg = mlp / "kina.toml"
    cfg.write_text(cfg.read_text().replace("dims = { B = 4, S = 128, D = 256, F = 1024 }", toml))
    rc, out, err = run(capsys, "build", str(mlp), "--no-cache")
    assert rc == 2 and f"kinac: error: kina.toml: {key}: {said}" in err
    assert ".int" not in err and "list[int]" not in err and "Input should" not in err
    rc, out, _ = run(capsys, "build", str(mlp), "--no-cache", "--json")
    doc = json.loads(out)
    assert rc == 2 and doc["artifacts"] == [] and doc["diagnostics"][0]["code"] == "K0154"
    assert doc["diagnostics"][0]["primary"]["key"] == key
    rc, out, _ = run(capsys, "check", str(mlp), "--no-cache", "--format", "json")
    assert rc == 2 and json.loads(out)[0]["primary"]["key"] == key


def test_unknown_dim_in_an_entry_is_k0152(mlp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = mlp / "kina.toml"
    cfg.write_text(cfg.read_text().replace("F = 1024 }", "F = 1024, d = 8 }"))
    rc, out, _ = run(capsys, "build", str(mlp), "--no-cache")
    assert rc == 1
    assert (
        "error[K0152]: entry `mlp`: `d` is not a dim of `mlp` (did you mean `D`?); its dims: B, S, D, F"
        in out
    )


def test_usage_errors_under_json_print_a_json_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = run(capsys, "build", str(tmp_path / "nope"), "--json")
    assert rc == 2 and err.startswith("kinac: error: no such file or directory")
    assert json.loads(out)["error"] == {
        "kind": "KinaUsageError",
        "exit_code": 2,
        "message": f"no such file or directory: {tmp_path / 'nope'}",
    }
    rc, out, _ = run(capsys, "check", str(tmp_path), "--format", "json")
    assert rc == 2 and "is not a kinac workspace" in json.loads(out)["error"]["message"]
