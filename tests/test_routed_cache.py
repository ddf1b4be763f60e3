"""A damaged or inconsistent cache index never yields a stale build (routed from the new-user
round): the reverse-dependency table (``rdep``, derived from the memo records' traces) is
checked against a count kept with it before an edit trusts it, rebuilt with a warning when it
disagrees, and ``cache verify`` checks it edge by edge; a generation counter that is not a
count is a damaged index (quarantined, started afresh), never an internal error.

Runs the CLI in-process on a two-file workspace, so each case costs a fraction of a second.
"""

from __future__ import annotations

import gc
import json
import sqlite3
from pathlib import Path

import pytest

from kinac.cli import main
from kinac.rules.store import INDEX, Store

LIB = "(defn twice [(x : (tensor f32 [N]))] -> (tensor f32 [N]) (add x x))\n"
USE = '(import "lib.kina")\n(defn quad [(x : (tensor f32 [N]))] -> (tensor f32 [N]) (twice (twice x)))\n'


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "kina.toml").write_text('[workspace]\nname = "tiny"\n')
    (root / "lib.kina").write_text(LIB)
    (root / "use.kina").write_text(USE)
    return root


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    gc.collect()  # close the in-process session's connections, as an exiting process would
    out = capsys.readouterr()
    assert "Traceback" not in out.err + out.out
    return code, out.out, out.err


def warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("kinac: warning:")]


def sql(cache: Path, stmt: str) -> None:
    con = sqlite3.connect(cache / INDEX)
    con.execute(stmt)
    con.commit()
    con.close()


DAMAGE = {
    "emptied": ["DELETE FROM rdep"],
    "emptied, count gone": ["DELETE FROM rdep", "DELETE FROM meta WHERE k = 'rdep_n'"],
    "emptied, count not a count": [
        "DELETE FROM rdep",
        "UPDATE meta SET v = 'abc' WHERE k = 'rdep_n'",
    ],
    "count gone, then a commit": ["DELETE FROM meta WHERE k = 'rdep_n'", "DELETE FROM rdep"],
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_reverse_edges_are_rebuilt_not_trusted(
    ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    cache = tmp_path / "cache"
    code, _, err = run(capsys, "build", str(ws), "--cache-dir", str(cache))
    assert code == 0 and not warnings(err), err
    first, *rest = DAMAGE[damage]
    sql(cache, first)
    if damage.endswith("then a commit"):  # a commit must not bless a table that lost its count
        with Store(cache) as store:
            store.save({}, settings={"probe": 1})  # type: ignore[attr-defined]
        con = sqlite3.connect(cache / INDEX)
        assert con.execute("SELECT v FROM meta WHERE k = 'rdep_n'").fetchone() is None
        con.close()
    for stmt in rest:
        sql(cache, stmt)
    (ws / "lib.kina").write_text(LIB.replace("defn twice", "defn thrice"))
    code, out, err = run(capsys, "build", str(ws), "--cache-dir", str(cache))
    assert code != 0 and "no errors" not in out + err  # quad calls a defn that is gone
    said = warnings(err)
    (ws / "lib.kina").write_text(LIB)
    code, out, err = run(capsys, "build", str(ws), "--cache-dir", str(cache))
    assert code == 0 and "no errors" in out + err, err
    # rebuilt once, with one warning: at the first edit that trusts the table (after the
    # probe's commit the first edit walks traces instead: a generation passed since its summary)
    (warning,) = said + warnings(err)
    assert "reverse" in warning and "rebuilt" in warning, warning
    # the rebuilt table serves the next edit without another warning
    (ws / "lib.kina").write_text(LIB.replace("add x x", "mul x x"))
    code, out, err = run(capsys, "build", str(ws), "--cache-dir", str(cache))
    assert code == 0 and "no errors" in out + err and not warnings(err), err


def test_cache_verify_reports_and_repairs_missing_reverse_edges(
    ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    run(capsys, "build", str(ws), "--cache-dir", str(cache))
    sql(cache, "DELETE FROM rdep WHERE dep IN (SELECT dep FROM rdep LIMIT 1)")
    code, out, err = run(capsys, "cache", "verify", str(ws), "--cache-dir", str(cache))
    assert code == 1, (out, err)
    report = json.loads(out)
    assert report["reverse_edges_missing"] >= 1, report
    code, out, err = run(capsys, "cache", "verify", str(ws), "--cache-dir", str(cache))
    assert code == 0 and json.loads(out)["reverse_edges_missing"] == 0, (out, err)


@pytest.mark.parametrize("value", ["abc", "12345678901234567890", "-3"])
def test_generation_that_is_not_a_count_is_a_damaged_index(
    ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    cache = tmp_path / "cache"
    run(capsys, "build", str(ws), "--cache-dir", str(cache))
    sql(cache, f"UPDATE meta SET v = '{value}' WHERE k = 'gen'")
    (ws / "lib.kina").write_text(LIB.replace("add x x", "mul x x"))
    code, out, err = run(capsys, "build", str(ws), "--cache-dir", str(cache))
    assert code == 0 and "no errors" in out + err, (out, err)
    (warning,) = warnings(err)
    assert "damaged" in warning and "generation" in warning, warning
    for cmd in ("stats", "gc", "verify"):
        sql(cache, f"UPDATE meta SET v = '{value}' WHERE k = 'gen'")
        code, out, err = run(capsys, "cache", cmd, str(ws), "--cache-dir", str(cache))
        assert code in (0, 1) and "internal error" not in err, (cmd, out, err)
