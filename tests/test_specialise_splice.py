"""The cached calls an entry splices are remembered (``kinac.check.spec_calls.spliced_nodes``): an
edit that re-specialises the entry reuses the nodes of every call it did not change (same
fragment at the same place), and the graph stays node for node the clean build's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kinac.pipeline import EntryKey, entry_graph
from kinac.session import Session

SRC = """(module calls)

(defn twice [(x : (tensor T [n d]))] -> (tensor T [n d]) (add x x))
(defn mix [(x : (tensor T [n d])) (w : (tensor T [d d]))] -> (tensor T [n d])
  (tanh (matmul x w)))

(defn net [(x : (tensor T [n d])) (w : (tensor T [d d]))] -> (tensor T [n d])
  (let [(a (mix x w)) (b (twice a)) (f (mix b w))]
    (twice f)))
"""
TOML = (
    '[workspace]\nname = "c"\n\n[[entry]]\nname = "net"\ndefn = "net"\n'
    'dims = { n = 4, d = 8 }\ndtypes = { T = "f32" }\n'
)


def _graph(sess: Session) -> Any:
    key = EntryKey("calls.kina", "net", (("d", 8), ("n", 4)), (("T", "f32"),), "cpu")
    return entry_graph(sess.db, key)


def test_edit_reuses_unchanged_calls_nodes_and_matches_a_clean_build(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "kina.toml").write_text(TOML)
    src = ws / "calls.kina"
    src.write_text(SRC)
    sess = Session(ws, no_cache=True)
    assert sess.build().error_count == 0
    old = _graph(sess)
    src.write_text(SRC.replace("(f (mix b w))", "(f (mix (exp b) w))"))  # the third call
    sess.invalidate_paths([src])
    assert sess.build().error_count == 0
    new = _graph(sess)
    clean = Session(ws, no_cache=True)
    assert new == _graph(clean)  # same graph as a clean build, node for node
    assert old.calls[:2] == new.calls[:2] and old.calls[2] != new.calls[2]
    for start, stop in new.calls[:2]:  # the calls before the edit: the same node records
        for i in range(start, stop):
            assert new.graph.nodes[i] is old.graph.nodes[i]
    nparams = len(new.graph.params)  # the params: the same pairs and nodes (_param)
    assert all(a is b for a, b in zip(new.graph.params, old.graph.params, strict=True))
    assert all(new.graph.nodes[i] is old.graph.nodes[i] for i in range(nparams))
    start, stop = new.calls[2]  # the edited call's nodes are rebuilt (one node later)
    assert all(new.graph.nodes[i] is not old.graph.nodes[i - 1] for i in range(start, stop))
    sess.close()
    clean.close()
