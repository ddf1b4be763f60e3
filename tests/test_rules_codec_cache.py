"""The codec's texts of big records by identity: two generations bounded by size.

A rebuilt value shares the sub-records an edit did not reach with earlier builds' values (the
checker's signature records, an entry's graph), so their text is reused as long as a build or
two encoded it recently, however many other big records were encoded in between (a fixed
count of 32 lost them after a start-up build); and the memory held stays bounded.
"""

from __future__ import annotations

from typing import Any

import pytest

from kinac.rules import codec
from kinac.rules.codec import encode, record


@record
class Blob:
    name: str
    items: tuple[int, ...]


def big(i: int) -> Blob:
    return Blob(f"b{i}", tuple(range(i, i + 1500)))  # ~7,500 characters: remembered


def test_a_big_text_survives_many_other_big_encodings(monkeypatch: pytest.MonkeyPatch) -> None:
    keep = big(0)
    text = encode(keep)
    for i in range(1, 200):  # far more than the 32 the cache used to hold
        encode(big(i))
    assert codec._text_hit(keep) == text.decode()
    seen: list[Any] = []
    monkeypatch.setattr(codec, "_key_text", lambda cls: seen.append(cls) or ())
    monkeypatch.setattr(codec, "_KEY_TEXT", {})
    assert encode(keep) == text and seen == []  # from the cache: no field was written


def test_the_cache_is_bounded_and_forgets_the_oldest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codec, "_TEXT_LIMIT", 100_000)
    monkeypatch.setattr(codec, "_TEXT_OF", {})
    monkeypatch.setattr(codec, "_TEXT_OLD", {})
    monkeypatch.setattr(codec, "_text_size", [0])
    first = big(0)
    encode(first)
    kept = [big(i) for i in range(1, 60)]
    for b in kept:
        encode(b)
    held = sum(len(t) for _, t in (*codec._TEXT_OF.values(), *codec._TEXT_OLD.values()))
    assert held <= 2 * (100_000 + 8_000)
    assert codec._text_hit(first) is None  # two generations ago
    assert codec._text_hit(kept[-1]) is not None
    assert encode(first) == codec._reference_encode(first).encode()  # re-encoded, same bytes
