"""The incremental store (issue 10.6): commits write only what changed, a fresh process after a
one-body edit reads only the edit's cone, and two processes sharing a cache stay correct."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

from kinac.rules.codec import encode
from kinac.rules.store import INDEX, Store
from kinac.session import Session

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benches"))
import wsgen  # noqa: E402

FILES, DEFNS = 8, 4


def _ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    wsgen.generate(ws, FILES, DEFNS)
    return ws


def _edit_body(ws: Path, f: int, d: int, variant: int) -> None:
    p = ws / f"m{f:03d}.kina"
    text = p.read_text()
    new = text.replace(wsgen.defn_text(f, d), wsgen.defn_text(f, d, variant))
    assert new != text
    p.write_text(new)


def _build(ws: Path, cache: Path) -> Session:
    sess = Session(ws, cache_dir=str(cache))
    sess.build()
    sess.close()
    return sess


def _rows_by_gen(cache: Path) -> dict[int, int]:
    con = sqlite3.connect(cache / INDEX)
    rows = dict(con.execute("SELECT gen, COUNT(*) FROM memo GROUP BY gen").fetchall())
    con.close()
    return rows


def test_a_commit_writes_only_the_memos_it_computed(tmp_path: Path) -> None:
    ws, cache = _ws(tmp_path), tmp_path / "cache"
    cold = _build(ws, cache)
    total = sum(_rows_by_gen(cache).values())
    assert total >= len(cold.db.events.executed_events)
    _edit_body(ws, 4, 3, 1)
    sess = _build(ws, cache)
    rows = _rows_by_gen(cache)
    newest = rows[max(rows)]
    executed = len(sess.db.events.executed_events)
    assert 0 < executed < 20 and newest <= executed + FILES + 4  # the edit's rows and inputs
    assert sum(rows.values()) == total


def test_a_fresh_process_after_an_edit_reads_only_the_cone(
    tmp_path: Path, monkeypatch: object
) -> None:
    ws, cache = _ws(tmp_path), tmp_path / "cache"
    _build(ws, cache)
    _edit_body(ws, 6, 3, 2)
    whole: list[int] = []
    orig = Store.load_graph

    def counting(self: Store) -> dict[str, bytes]:
        whole.append(1)
        return orig(self)

    monkeypatch.setattr(Store, "load_graph", counting)  # type: ignore[attr-defined]
    sess = Session(ws, cache_dir=str(cache))
    report = sess.build()
    assert sess.db._cone_rev == sess.db.rev and len(sess.db._cone) < 60  # of ~400 memos
    assert whole == []  # the graph was never read whole
    assert {n for n, _ in sess.db.events.executed_names()} <= {
        "parse",
        "parse_diagnostics",
        "file_index",
        "defn_ast",
        "callees",
        "check_defn",
        "signature",
        "file_report",
        "build",
    }
    sess.close()
    clean = Session(ws, no_cache=True)
    assert encode(report) == encode(clean.build())


def test_two_processes_sharing_a_cache_stay_correct(tmp_path: Path) -> None:
    """A watch (one long session) and builds (fresh sessions) interleave commits on one cache;
    a writer whose view is stale keeps the other's summaries, and every result equals a clean
    build."""
    ws, cache = _ws(tmp_path), tmp_path / "cache"
    watch = Session(ws, cache_dir=str(cache))
    watch.build()
    for step, (f, d, v) in enumerate([(2, 1, 1), (5, 3, 2), (3, 2, 3), (7, 0, 1)]):
        _edit_body(ws, f, d, v)
        changed = [ws / f"m{f:03d}.kina"]
        if step % 2 == 0:
            got = _build(ws, cache)  # a build commits first ...
            watch.invalidate_paths(changed)
            watch_report = watch.build()  # ... then the watch, with an older view
        else:
            watch.invalidate_paths(changed)
            watch_report = watch.build()
            got = _build(ws, cache)
        want = encode(Session(ws, no_cache=True).build())
        assert encode(watch_report) == want, step
        fresh = Session(ws, cache_dir=str(cache))
        assert encode(fresh.build()) == want, step
        fresh.close()
        assert got is not None
    watch.close()


def test_a_session_whose_memory_another_process_outdated_does_not_trust_it(tmp_path: Path) -> None:
    """A watch holds memos from before a build's commit: cone mode must not trust them (the
    stored traces the summary describes are the build's, not the watch's)."""
    ws, cache = _ws(tmp_path), tmp_path / "cache"
    live = Session(ws, cache_dir=str(cache))
    live.build()
    (ws / "m002.kina").write_text(
        (ws / "m002.kina").read_text().replace("m001_d1 x w", "m001_d1x x w")
    )
    _build(ws, cache)  # another process commits the broken call
    _edit_body(ws, 6, 3, 1)
    live.invalidate_paths([ws / "m002.kina", ws / "m006.kina"])
    got = live.build()
    live.close()
    assert encode(got) == encode(Session(ws, no_cache=True).build())
    assert any(d.code == "K0202" for f in got.files for d in f.diagnostics)


def test_a_build_that_ran_nothing_still_saves_recomputed_code_identities(tmp_path: Path) -> None:
    """After kinac's sources change, identities are recomputed once (~0.5 s); a no-op build
    must save them, or every later process recomputes them."""
    from kinac.rules.codeid import CODE

    ws, cache = _ws(tmp_path), tmp_path / "cache"
    _build(ws, cache)
    CODE.ids_changed = True  # as after an upgrade whose edits left every identity equal
    sess = Session(ws, cache_dir=str(cache))
    con = sqlite3.connect(cache / INDEX)
    con.execute("DELETE FROM meta WHERE k = 'code_ids'")
    con.commit()
    con.close()
    sess.build()
    assert sess.db.events.executed_events == []
    assert Store(cache).load_setting("code_ids") == CODE.export_ids()
    sess.close()


def test_values_up_to_the_inline_size_are_rows_not_files(tmp_path: Path) -> None:
    """A 300 KB value (an L=32 entry's graph) is stored in the value store's SQLite rows:
    no file and no directories of its own (cache_files.INLINE_VALUES); it reads back."""
    from kinac.rules.codec import digest, pack
    from kinac.rules.query import MISSING

    store = Store(tmp_path / "c")
    value = tuple(f"node {i}" for i in range(30_000))
    blob = pack(value)
    assert len(blob) > 250_000
    store.stage_blob(digest(blob), blob)
    store.save({})
    assert [p for p in (tmp_path / "c" / "blobs").rglob("*") if p.suffix == ".val"] == []
    store.close()
    again = Store(tmp_path / "c")
    assert again.load_value(digest(blob)) == value
    assert again.load_value("0" * 32) is MISSING
    again.close()
