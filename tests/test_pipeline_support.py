"""The pipeline's name index (``first_by_name``): the first item of a name wins, as the linear
scan it replaces did, and an index never answers for a different tuple."""

from __future__ import annotations

from kinac.pipeline_support import first_by_name


def test_first_item_of_a_name_wins_and_misses_are_none() -> None:
    items = (("f", 1), ("g", 2), ("f", 3))
    assert first_by_name(items, "f", lambda it: it[0]) == ("f", 1)
    assert first_by_name(items, "g", lambda it: it[0]) == ("g", 2)
    assert first_by_name(items, "h", lambda it: it[0]) is None


def test_an_index_belongs_to_its_tuple() -> None:
    for i in range(200):  # more tuples than the index keeps, each answered by its own items
        items = tuple((f"n{j}", i) for j in range(3))
        assert first_by_name(items, "n1", lambda it: it[0]) == ("n1", i)
