"""The event log: which queries ran, which were reused, and why each re-run happened.

Tests assert on it ("exactly these queries re-ran"), and ``kinac build --why`` prints, for
each executed query, the chain of changed dependencies that led to it, down to the input.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Event:
    """One executed or reused query."""

    kind: str  # "executed" | "reused"
    query: str
    stage: str
    key: Any
    seconds: float = 0.0
    qid: str = ""
    new: bool = False  # executed with no earlier memo at all
    cutoff: bool = False  # executed, and produced the same fingerprint as before


@dataclass
class EventLog:
    """Events since the last :meth:`clear`; ``why`` maps a re-run memo to the dep that changed."""

    events: list[Event] = field(default_factory=list)
    why: dict[str, str] = field(default_factory=dict)

    def executed(self, q: Any, key: Any, qid: str, seconds: float, new: bool, cutoff: bool) -> None:
        self.events.append(Event("executed", q.name, q.stage, key, seconds, qid, new, cutoff))

    def reused(self, q: Any, key: Any, qid: str = "") -> None:
        """``key`` is None when the memo was verified without decoding its key (the fast path)."""
        self.events.append(Event("reused", q.name, q.stage, key, 0.0, qid))

    def clear(self) -> None:
        self.events.clear()
        self.why.clear()

    @property
    def executed_events(self) -> list[Event]:
        return [e for e in self.events if e.kind == "executed"]

    @property
    def reused_events(self) -> list[Event]:
        return [e for e in self.events if e.kind == "reused"]

    def executed_names(self, stage: str | None = None) -> list[tuple[str, Any]]:
        """``(query, key)`` of each executed query, optionally of one stage, in run order."""
        return [
            (e.query, e.key)
            for e in self.events
            if e.kind == "executed" and (stage is None or e.stage == stage)
        ]

    def chain(self, qid: str, describe: Any, limit: int = 32) -> list[str]:
        """The dependency chain that made ``qid`` re-run: itself, the dep that changed, ..."""
        out: list[str] = []
        seen: set[str] = set()
        cur: str | None = qid
        while cur is not None and cur not in seen and len(out) < limit:
            seen.add(cur)
            out.append(describe(cur))
            nxt = self.why.get(cur)
            if nxt is not None and nxt not in self.why and not _is_qid(nxt):
                out.append(nxt)
                break
            cur = nxt
        return out


def _is_qid(text: str) -> bool:
    return len(text) == 32 and all(c in "0123456789abcdef" for c in text)
