"""The codec writes canonical JSON directly (``_encode_into``) rather than through a plain copy
and ``json.dumps``: the bytes must be exactly those of the definition (``_reference_encode``)
for every value, or every fingerprint and cached value would change. Random values (records
of the pipeline, nested tuples and lists, any unicode, big ints, floats with NaN and
infinities, bytes, dicts, sets, bools, subclasses) and every value a real build stores."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kinac.diag.model import Label, NodeRef, Span
from kinac.rules import codec
from kinac.rules.codec import encode
from kinac.tir.graph import Node, TType


class _Color(enum.IntEnum):
    RED = 1


@codec.record
class _Holder:
    """Any value directly in a field (bools, IntEnums, floats: written by definition, not
    inline as the str and int fields are)."""

    y: Any
    x: Any


@codec.record
class _Empty:
    """A record without fields: its tag alone."""


def _reference(v: Any) -> bytes:
    return codec._reference_encode(v).encode("utf-8")


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(),
    st.binary(max_size=8),
    st.just(_Color.RED),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.tuples(inner, inner),
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=3), inner, max_size=3),
        st.frozensets(st.integers(), max_size=3),
        st.builds(TType, st.sampled_from(["f32", "i32"]), st.lists(st.integers(0, 9)).map(tuple)),
        st.builds(lambda op, a, t: Node(op, a, (("k", t),), TType("f32", ())),
                  st.text(max_size=4), st.lists(st.integers(0, 9), max_size=3).map(tuple), inner),
        st.builds(lambda f, n, m: Label(NodeRef(f, "d", n), m), st.text(max_size=4),
                  st.integers(0, 99), st.text(max_size=6)),
        st.builds(_Holder, inner, inner),
        st.just(_Empty()),
        st.builds(Span, st.text(max_size=4), st.integers(0, 9), st.integers(0, 9),
                  st.integers(0, 9), st.integers(0, 9)),
    ),
    max_leaves=20,
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(values)
def test_direct_encoding_is_the_reference_text(v: Any) -> None:
    assert encode(v) == _reference(v)


def test_every_value_of_a_build_encodes_as_the_reference(tmp_path: Path) -> None:
    import sys

    import kinac.rules.engine as engine
    from kinac.session import Session

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benches"))
    import scaling

    seen: list[Any] = []
    real = engine.pack

    def keep(v: Any) -> bytes:
        seen.append(v)
        return real(v)

    engine.pack = keep  # type: ignore[assignment]
    try:
        sess = Session(scaling.make_workspace(tmp_path, 2), cache_dir=str(tmp_path / "c"))
        assert sess.build().error_count == 0
        sess.close()
    finally:
        engine.pack = real
    plain = [v for v in seen if type(v) is not bytes]
    assert len(plain) > 50
    for v in plain:
        assert encode(v) == _reference(v)


def test_a_big_record_holding_a_list_is_encoded_afresh_after_it_changes() -> None:
    """Big records are remembered by identity (values share them): never one that holds a
    list (or dict, set), which could change under the memo."""
    items = [Label(NodeRef("f", "d", i), "x" * 50) for i in range(200)]
    held = Node("op", (), (("labels", items),), TType("f32", ()))
    frozen = Node("op", (), (("labels", tuple(items)),), TType("f32", ()))
    first, again = encode(held), encode(frozen)
    assert encode(frozen) == again == _reference(frozen)  # remembered: the same text
    items.append(Label(NodeRef("g", "d", 0), "late"))
    assert encode(held) == _reference(held) != first
