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
    monkeypatch.setattr(codec, "_key_text", lambda cls: seen.append(cls) or ())  # type: ignore[func-returns-value]
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


# ---------------------------------------------------------------- runs of long tuples


@record
class Item:
    n: Any
    tag: str
    extra: Any = None


def _count_items(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every Item the codec writes field by field from now on (not taken from a run's text)."""
    seen: list[Any] = []
    real = codec._encode_into

    def counting(v: Any, out: list[str]) -> None:
        if type(v) is Item:
            seen.append(v)
        real(v, out)

    monkeypatch.setattr(codec, "_encode_into", counting)
    return seen


def test_a_rebuilt_tuple_reuses_the_runs_of_unchanged_elements(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    items = tuple(Item(i, f"t{i}") for i in range(100))
    assert encode(items) == codec._reference_encode(items).encode()
    edited = (*items[:70], Item(-1, "new"), *items[71:])  # a new tuple, one new element
    seen = _count_items(monkeypatch)
    assert encode(edited) == codec._reference_encode(edited).encode()
    assert seen == list(edited[64:96])  # only the run holding the new element, written again
    seen.clear()
    inserted = (*items[:40], Item(-2, "ins"), *items[40:])  # every later run shifted
    assert encode(inserted) == codec._reference_encode(inserted).encode()
    assert seen == list(inserted[32:])


def test_a_run_is_reused_only_for_the_same_objects_and_never_when_mutable() -> None:
    items = tuple(Item(i + 1, "x") for i in range(64))
    encode(items)
    equal = (Item(1.0, "x"), *items[1:])  # == items[0], but its text differs
    assert equal[0] == items[0] and equal == items
    assert encode(equal) == codec._reference_encode(equal).encode()
    box: list[int] = [1]
    holding = tuple(Item(i, "y", box if i == 5 else None) for i in range(64))
    first = encode(holding)
    box.append(2)  # the same objects, a different text: the run met a list, so not remembered
    again = encode(tuple(holding))
    assert again != first and again == codec._reference_encode(holding).encode()


def test_runs_are_bounded_by_two_generations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codec, "_TEXT_LIMIT", 20_000)
    monkeypatch.setattr(codec, "_RUN_OF", {})
    monkeypatch.setattr(codec, "_RUN_OLD", {})
    monkeypatch.setattr(codec, "_run_size", [0])
    tuples = [tuple(Item(i, f"g{g}") for i in range(64)) for g in range(40)]
    for t in tuples:
        encode(t)
    held = sum(len(x) for _, x in (*codec._RUN_OF.values(), *codec._RUN_OLD.values()))
    assert held <= 2 * (20_000 + 3_000)  # each generation: its limit and one more run
    assert encode(tuples[0]) == codec._reference_encode(tuples[0]).encode()


def test_runs_of_tuples_are_reused_by_identity_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """A graph's params are (name, type) pairs: a long tuple of tuples has runs as well."""
    pairs = tuple((f"w{i}", Item(i, "t")) for i in range(64))
    encode(pairs)
    edited = (*pairs[:40], ("new", Item(-1, "t")), *pairs[41:])
    seen = _count_items(monkeypatch)
    assert encode(edited) == codec._reference_encode(edited).encode()
    assert seen == [edited[i][1] for i in range(32, 64)]
    box = [1]
    holding = tuple((i, box) for i in range(40))  # a tuple run that met a list
    first = encode(holding)
    box.append(2)
    assert encode(tuple(holding)) != first
