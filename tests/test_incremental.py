"""Incremental oracle tests: an edit re-runs exactly the queries it should, no more, no less.

Each test builds a multi-file workspace, makes one edit, rebuilds in a *fresh* session over the
same cache (as a new ``kinac build`` process would), and asserts on the event log.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from kinac.session import Session

WS = Path(__file__).resolve().parent.parent / "workspaces" / "transformer"
READ_STAGE = {
    "parse",
    "parse_diagnostics",
    "file_index",
    "defn_ast",
    "signature",
    "scope",
    "source_files",
}


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    dst = tmp_path / "ws"
    shutil.copytree(WS, dst, ignore=shutil.ignore_patterns(".kinac-cache"))
    return dst


def build(ws: Path, **kw: Any) -> tuple[Session, Any]:
    sess = Session(ws, cache_dir=str(ws.parent / "cache"), **kw)
    report = sess.build()
    sess.close()
    return sess, report


def executed(sess: Session, stage: str | None = None) -> set[tuple[str, Any]]:
    return set(sess.db.events.executed_names(stage))


def executed_after_reading(sess: Session) -> set[tuple[str, Any]]:
    return {(n, k) for n, k in executed(sess) if n not in READ_STAGE}


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path.name}"
    path.write_text(text.replace(old, new, 1))


def test_clean_workspace_checks_and_noop_reuses_everything(ws: Path) -> None:
    sess, report = build(ws)
    assert report.error_count == 0, [d.message for f in report.files for d in f.diagnostics]
    assert len(report.files) == 3
    sess2, report2 = build(ws)
    assert executed(sess2) == set()
    assert report2 == report


def test_comment_and_whitespace_edit_reruns_nothing_after_reading(ws: Path) -> None:
    build(ws)
    edit(ws / "attention.kina", "(let [(q", ";; a new comment\n  (let   [(q")
    edit(ws / "ffn.kina", "(swiglu", "\n\n   (swiglu")
    sess, _ = build(ws)
    ran = executed(sess)
    assert ran, "the reader must re-run on an edited file"
    assert {n for n, _ in ran} <= READ_STAGE
    assert executed_after_reading(sess) == set()


def test_body_edit_rechecks_that_defn_only(ws: Path) -> None:
    from kinac.pipeline import DefnKey

    build(ws)
    edit(
        ws / "ffn.kina",
        "(swiglu (rms-norm x wn) wg wu wd)",
        "(swiglu (rms-norm (neg x) wn) wg wu wd)",
    )
    sess, report = build(ws)
    assert report.error_count == 0
    ffn = DefnKey("ffn.kina", "ffn")
    checks = {k for n, k in executed(sess) if n == "check_defn"}
    assert checks == {ffn}
    from kinac.pipeline import EntryKey

    for name, key in executed_after_reading(sess):
        if isinstance(key, DefnKey):
            assert key == ffn, (name, key)  # per-defn queries of that defn only
        elif isinstance(key, EntryKey):
            assert key.defn == "block", (name, key)  # the entry that inlines ffn, not attention's
        else:
            assert (
                (name, key)
                in {("file_report", "ffn.kina"), ("build", ()), ("entry_report", "block_small")}
                or name
                in (
                    "solve",
                    "host_kernel_llvm",
                    "host_kernel_object",
                    "host_piece",
                    "host_piece_object",
                )
                or (name == "specialise_call" and key.callee.name == "ffn")
            ), (name, key)  # pieces, kernels: test_kernels_incremental
    rebuilt = {(n, k.defn) for n, k in executed(sess) if isinstance(k, EntryKey)}
    assert rebuilt == {
        ("entry_graph", "block"),
        ("shard_propagate", "block"),
        ("lowered", "block"),
        ("object_code", "block"),
    }


def test_signature_edit_rechecks_exactly_its_dependents(ws: Path) -> None:
    from kinac.pipeline import DefnKey

    build(ws)
    # ffn's result type changes: ffn itself and its caller (block) are re-checked; attention is not.
    edit(ws / "ffn.kina", "-> (tensor T [..b D])", "-> (tensor T [..b F])")
    sess, report = build(ws)
    checks = {k for n, k in executed(sess) if n == "check_defn"}
    assert checks == {DefnKey("ffn.kina", "ffn"), DefnKey("block.kina", "block")}
    assert report.error_count >= 1  # the body no longer matches, nor does block's use of it


def test_adding_removing_and_renaming_a_file(ws: Path) -> None:
    from kinac.pipeline import DefnKey

    build(ws)
    (ws / "extra.kina").write_text(
        "(defn twice [(x : (tensor f32 [N]))] -> (tensor f32 [N]) (add x x))\n"
    )
    sess, report = build(ws)
    assert {k for n, k in executed(sess) if n == "check_defn"} == {DefnKey("extra.kina", "twice")}
    assert len(report.files) == 4 and report.error_count == 0

    (ws / "extra.kina").rename(ws / "more.kina")
    sess, report = build(ws)
    assert {k for n, k in executed(sess) if n == "check_defn"} == {DefnKey("more.kina", "twice")}
    assert [f.file for f in report.files] == [
        "attention.kina",
        "block.kina",
        "ffn.kina",
        "more.kina",
    ]

    (ws / "more.kina").unlink()
    sess, report = build(ws)
    assert {k for n, k in executed(sess) if n == "check_defn"} == set()
    assert len(report.files) == 3 and report.error_count == 0

    # removing a file that others import is an error in the importer, and only there
    (ws / "ffn.kina").unlink()
    sess, report = build(ws)
    codes = {d.code for f in report.files for d in f.diagnostics}
    assert "K0150" in codes
    assert {f.file for f in report.files if f.diagnostics} == {"block.kina"}


def test_watch_style_invalidation_in_one_process(ws: Path) -> None:
    sess = Session(ws, cache_dir=str(ws.parent / "cache"))
    sess.build()
    sess.db.events.clear()
    sess.invalidate_paths([ws / "block.kina"])  # a save with no change
    sess.build()
    assert executed(sess) == set()
    edit(ws / "block.kina", "(add h (ffn", "(add h (ffn")  # identical text again
    sess.db.events.clear()
    edit(ws / "attention.kina", "(rsqrt Dh)", "(rsqrt  Dh)")
    sess.invalidate_paths([ws / "attention.kina"])
    sess.build()
    assert executed_after_reading(sess) == set()
    sess.close()


def test_kina_toml_meshes_are_visible_and_only_a_mesh_edit_rechecks(ws: Path) -> None:
    """``[[mesh]]`` in kina.toml declares a mesh for every file (as a source `(mesh …)` does);
    editing a mesh re-checks every defn, editing another kina.toml key re-checks none."""
    edit(ws / "ffn.kina", "(tensor T [..b D])", "(tensor T [..b D] @sharded(axis=0, mesh=tp))")
    sess, report = build(ws)
    codes = [d.code for f in report.files for d in f.diagnostics]
    assert "K0702" in codes  # no mesh `tp` anywhere yet
    toml = ws / "kina.toml"
    # one device: the mesh is declared, and its size asks nothing of the sharded dim
    toml.write_text(toml.read_text() + '\n[[mesh]]\nname = "tp"\nshape = [1]\n')
    sess, report = build(ws)
    assert [d.code for f in report.files for d in f.diagnostics] == []
    assert ("config_meshes", ()) in executed(sess)
    rechecked = {k for n, k in executed(sess) if n == "check_defn"}
    assert len(rechecked) > 3  # every defn's check read the meshes
    toml.write_text(toml.read_text() + "\n[cache]\nsize_limit_mb = 512\n")
    sess, _ = build(ws)
    assert {n for n, _ in executed(sess) if n == "check_defn"} == set()  # firewalled
    toml.write_text(toml.read_text().replace("shape = [1]", "shape = [4]"))
    sess, report = build(ws)  # 4 devices: the callers must now pass a batch dim 4 divides
    assert {d.code for f in report.files for d in f.diagnostics} == {"K0413"}


def test_a_mesh_size_edit_rechecks_the_callers_of_a_sharded_defn(tmp_path: Path) -> None:
    """The sizes behind `@sharded` are read through the file index: growing a mesh re-checks
    the defns that call across it, and the new size is what the obligation asks for."""
    from kinac.pipeline import DefnKey

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "kina.toml").write_text('[workspace]\nname = "m"\n')
    (ws / "lib.kina").write_text(
        "(module lib)\n(mesh tp [2])\n"
        "(defn f [(x : (tensor f32 [N D] @sharded(axis=1, mesh=tp)))] -> (tensor f32 [N D]) x)\n"
    )
    (ws / "app.kina").write_text(
        '(module app)\n(import "lib.kina")\n'
        "(defn g [(y : (tensor f32 [N (* 2 E)]))] -> (tensor f32 [N (* 2 E)]) (f y))\n"
    )
    sess, report = build(ws)
    assert report.error_count == 0, [d.message for f in report.files for d in f.diagnostics]
    edit(ws / "lib.kina", "(mesh tp [2])", "(mesh tp [4])")
    sess, report = build(ws)
    assert ("check_defn", DefnKey("app.kina", "g")) in executed(sess)
    codes = [d.code for f in report.files for d in f.diagnostics]
    assert codes == ["K0413"], codes  # 4 does not divide 2*E (E = 1)
