"""``kina.toml`` entry diagnostics point at the entry's key (lead's list, 2026-12-02e).

K0151, K0152 and K0155 pointed at ``kina.toml:1:1`` (``[workspace]`` or a comment), whatever
the entry. Now at the entry's ``defn``, the dim or dtype variable it names, its ``grad``; the
place is found when rendering (``kinac/pipeline_toml.py``), so a comment added above an entry
moves the span (the entries' values stay equal).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from goldens import compare

from kinac.diag.model import NodeRef
from kinac.pipeline_toml import entry_ref, toml_span
from kinac.session import Session

GOLDEN = Path(__file__).resolve().parent / "golden" / "toml_spans"


def _ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(GOLDEN / "ws", ws)
    return ws


def test_entry_diagnostics_render_at_the_entry(tmp_path: Path) -> None:
    _ws(tmp_path)
    env = {**os.environ, "KINAC_SERVER": "0", "KINAC_CACHE_DIR": str(tmp_path / "cache")}
    r = subprocess.run(
        [sys.executable, "-m", "kinac", "build", "ws"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert r.returncode == 1, r.stderr
    compare(GOLDEN / "build.out", r.stdout, "kina.toml entry diagnostics")
    assert "kina.toml:1:" not in r.stdout
    for where in ("kina.toml:16:1", "kina.toml:23:17", "kina.toml:30:6", "kina.toml:37:12"):
        assert where in r.stdout, where  # defn, Q in an inline table, dims.Z, dtype T
    assert "kina.toml:44:1" in r.stdout  # grad


def _spans(sess: Session) -> dict[str, tuple[int, int]]:
    report = sess.build()
    out = {}
    for d in sess.diagnostics(report):
        s = sess.resolve(d.primary.loc)
        out[d.code + d.message.split(":")[0]] = (s.line, s.col)
    return out


def test_a_comment_above_an_entry_moves_its_span(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    first = Session(ws, cache_dir=str(tmp_path / "cache"))
    before = _spans(first)
    first.close()
    toml = ws / "kina.toml"
    toml.write_text(toml.read_text().replace("# K0151", "# one\n# two\n# K0151", 1))
    second = Session(ws, cache_dir=str(tmp_path / "cache"))
    after = _spans(second)
    second.close()
    assert before.keys() == after.keys() and len(before) == 5
    for k, (line, col) in before.items():
        assert after[k] == (line + 2, col), k  # every entry is below the inserted comment


def test_other_layouts_fall_back_to_the_entry() -> None:
    text = (
        "[workspace]\nname = 'w'\n\n[[entry]]\nname = 'a'\ndefn = \"f\"\n"
        '"..b" = 1\n\n[[entry]]\nname = "b"\ndims = { "..b" = [2, 3] }\n'
    )
    s = toml_span(text, entry_ref("a", "defn"))
    assert s is not None and (s.line, s.col, s.end_col) == (6, 1, 11)
    s = toml_span(text, entry_ref("b", "dims", "..b"))  # a quoted key, quotes included
    assert s is not None and (s.line, s.col, s.end_col) == (11, 10, 15)
    s = toml_span(text, entry_ref("b", "grad"))  # no such key: the entry's [[entry]] line
    assert s is not None and (s.line, s.col) == (9, 1)
    inline = 'entry = [{ name = "c", defn = "f" }]\n'
    s = toml_span(inline, entry_ref("c", "defn"))  # an inline array: the line naming it
    assert s is not None and s.line == 1
    assert toml_span(text, NodeRef("kina.toml", "f", 0)) is None  # not an entry's key
