"""The engine's work grows linearly with the size of the graph (issue 15: a 1,500-defn file).

Wall time is noisy on a shared machine, so these tests count work instead: how many times the
engine looks a memo or an input up in its tables while it builds, commits, and verifies. The
toy graph has the shape that made summaries quadratic in the checker: every ``leaf`` memo (a
defn's check) also reads one ``shared`` memo that reads every defn (the file's recursion
analysis), so a walk of the subgraph under each leaf, done separately per leaf, costs O(n²).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kinac.rules import Database, input_query, query
from kinac.rules.store import Store

SOURCE = {"text": "a b c"}


@input_query("scale.src")
def src(db: Database, file: str) -> str:
    return SOURCE["text"]


@query("scale.sig")
def sig(db: Database, i: int) -> int:
    return len(src(db, "f")) + i


@query("scale.shared")
def shared(db: Database, n: int) -> int:
    return sum(sig(db, i) for i in range(n))


@query("scale.leaf")
def leaf(db: Database, key: tuple[int, int]) -> int:
    i, n = key
    below = sig(db, i - 1) if i > 0 else 0
    return shared(db, n) + below + sig(db, i)


@query("scale.root")
def root(db: Database, n: int) -> tuple[int, ...]:
    return tuple(leaf(db, (i, n)) for i in range(n)) + tuple(sig(db, i) for i in range(n))


class CountingDict(dict[str, Any]):
    """A dict that counts lookups (``get``, ``in``, ``[]``): the engine's unit of work."""

    lookups = 0

    def get(self, key: Any, default: Any = None) -> Any:
        CountingDict.lookups += 1
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        CountingDict.lookups += 1
        return super().__contains__(key)

    def __getitem__(self, key: Any) -> Any:
        CountingDict.lookups += 1
        return super().__getitem__(key)


def counted(store_dir: Path) -> Database:
    db = Database(Store(store_dir))
    db._memos = CountingDict()  # type: ignore[assignment]
    db._inputs = CountingDict()  # type: ignore[assignment]
    return db


def work(tmp_path: Path, n: int) -> dict[str, int]:
    """Table lookups of a cold build with its commit, a no-op and a one-leaf edit in fresh
    databases on the same store."""
    SOURCE["text"] = "a b c"
    out: dict[str, int] = {}
    for phase in ("cold", "noop", "edit"):
        if phase == "edit":
            SOURCE["text"] = "a b c d"
        db = counted(tmp_path / f"n{n}")
        CountingDict.lookups = 0
        root(db, n)
        db.commit()
        out[phase] = CountingDict.lookups
        db.store.close()  # type: ignore[union-attr]
    return out


def test_build_commit_and_verify_work_is_linear(tmp_path: Path) -> None:
    small, large = work(tmp_path, 200), work(tmp_path, 800)
    for phase in ("cold", "noop", "edit"):
        ratio = large[phase] / max(small[phase], 1)
        assert ratio < 4.6, f"{phase}: {small[phase]} -> {large[phase]} lookups (x{ratio:.1f})"
