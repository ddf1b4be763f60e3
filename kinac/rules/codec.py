"""Canonical encoding of query keys and values, and their fingerprints.

Every value a query returns is encoded to canonical JSON: the same value always gives the same
bytes, whatever the process, platform or dict order. Fingerprints are BLAKE2b digests of that
encoding. JSON, not pickle, so a cache file can never run code: decoding only rebuilds plain
data and the frozen record classes registered with :func:`record`.

Supported values: ``None``, ``bool``, ``int``, ``float`` (NaN and infinities included), ``str``,
``bytes``, tuples (lists decode as tuples), dicts with canonically sortable keys, and instances
of ``@record`` classes (frozen dataclasses, encoded field by field with their class tag).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import math
import operator
from json.encoder import encode_basestring as _encode_str  # json's own (C)
from typing import Any, TypeVar, dataclass_transform

T = TypeVar("T")

_RECORDS: dict[str, type] = {}
_FIELDS: dict[type, tuple[str, ...]] = {}
_TAGS: dict[type, str] = {}


class CodecError(ValueError):
    """Raised when bytes do not decode to a canonical value (corrupt or foreign data)."""


@dataclass_transform(frozen_default=True)
def record(cls: type[T]) -> type[T]:
    """Make ``cls`` a frozen, slotted dataclass whose instances the codec can encode.

    Its tag in encoded form is its module path and name, so names need only be unique per module.
    Renaming or moving a record class changes encodings: cached values of the old form simply fail
    to decode and are recomputed.
    """
    dc = dataclasses.dataclass(frozen=True, slots=True)(cls)
    tag = _tag(dc)
    _RECORDS[tag] = dc
    _FIELDS[dc] = tuple(f.name for f in dataclasses.fields(dc))  # type: ignore[arg-type]
    _TAGS[dc] = tag
    return dc


CODEC_VERSION = 2  # part of every query's identity: a change here never serves stale values


def _tag(cls: type) -> str:
    """``check.sig.Step``: the module path (less ``kinac.``) and class name, unique by construction."""
    mod = cls.__module__
    return f"{mod[6:] if mod.startswith('kinac.') else mod}.{cls.__qualname__}"


def _to_plain(v: Any) -> Any:
    if v is None or v is True or v is False or isinstance(v, str):
        return v
    t = type(v)
    if t is int:
        return v
    if t is float:
        if math.isnan(v):
            return {"$f": "nan"}
        if math.isinf(v):
            return {"$f": "inf" if v > 0 else "-inf"}
        return v
    if t is tuple or t is list:
        return [_to_plain(x) for x in v]
    fields = _FIELDS.get(t)
    if fields is not None:
        out: dict[str, Any] = {"$t": _TAGS[t]}
        for name in fields:
            out[name] = _to_plain(getattr(v, name))
        return out
    if t is bytes:
        return {"$b": base64.b64encode(v).decode("ascii")}
    if t is dict:
        items = [(_to_plain(k), _to_plain(x)) for k, x in v.items()]
        items.sort(key=lambda kv: json.dumps(kv[0], sort_keys=True))
        return {"$m": [[k, x] for k, x in items]}
    if t is frozenset or t is set:
        elems = [_to_plain(x) for x in v]
        elems.sort(key=lambda e: json.dumps(e, sort_keys=True))
        return {"$s": elems}
    if isinstance(v, bool | int):  # subclasses (e.g. numpy ints are not; IntEnum is)
        return int(v)
    if isinstance(v, float):
        return _to_plain(float(v))
    if isinstance(v, str):
        return str(v)
    raise TypeError(f"value of type {t.__name__} is not canonically encodable")


# the public name of the plain-JSON form (``kinac check --json`` prints query keys with it);
# ``_to_plain`` stays: this file is a shared contract, changed additively only
to_plain = _to_plain


def _record_class(tag: str) -> type | None:
    """The class registered for ``tag``, importing its module first if it is not loaded yet.

    A tag names its class's module (``artifacts.gpu.GpuLoweredEntry`` is class
    ``GpuLoweredEntry`` of ``kinac.artifacts.gpu``), so any kinac record decodes in any process
    whatever was imported before: stages import their modules lazily, and a fresh process may
    decode a value before the stage that defines its class ever ran. This is registration, not a
    list: the engine knows no stage by name. Only ``kinac`` modules are imported this way (a
    foreign tag in a damaged cache cannot import arbitrary code), and only a class that its
    module registered with :func:`record` is ever built.
    """
    cls = _RECORDS.get(tag)
    if cls is not None or "." not in tag:
        return cls
    import importlib

    module = tag.rpartition(".")[0]
    while module:  # the longest prefix that is a module (a class may be nested)
        if all(p.isidentifier() for p in module.split(".")) and _defines_records(module):
            try:
                importlib.import_module("kinac." + module)
                break
            except ImportError:
                pass
        module = module.rpartition(".")[0]
    return _RECORDS.get(tag)


def _defines_records(module: str) -> bool:
    """Whether ``kinac.<module>`` is a source file of kinac's that defines ``@record`` classes,
    read from the file before anything is imported: a tag of a damaged or crafted cache must
    not run a module's top level (``__main__.X`` imported ``kinac.__main__``, which ran the
    command line with the process's argv and exited it), nor a parent module's (finding
    ``a.b`` imports ``a``)."""
    import pathlib

    base = pathlib.Path(__file__).resolve().parent.parent  # the kinac package
    path = base.joinpath(*module.split("."))
    for source in (path.with_name(path.name + ".py"), path / "__init__.py"):
        try:
            if source.is_file():
                return "@record" in source.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return False
    return False


def _from_plain(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_from_plain(x) for x in v)
    if isinstance(v, dict):
        tag = v.get("$t")
        if tag is not None:
            cls = _record_class(tag)
            if cls is None:
                raise CodecError(f"unknown record tag {tag!r}")
            kwargs = {k: _from_plain(x) for k, x in v.items() if k != "$t"}
            try:
                return cls(**kwargs)
            except TypeError as e:
                raise CodecError(f"record {tag!r} does not match its class: {e}") from None
        if "$b" in v:
            return base64.b64decode(v["$b"])
        if "$f" in v:
            return float(v["$f"])
        if "$m" in v:
            return {_from_plain(k): _from_plain(x) for k, x in v["$m"]}
        if "$s" in v:
            return frozenset(_from_plain(x) for x in v["$s"])
        raise CodecError(f"unknown object form with keys {sorted(v)[:3]}")
    return v


def _reference_encode(value: Any) -> str:
    """The canonical JSON text of ``value`` by definition: plain data, then ``json.dumps``."""
    return json.dumps(_to_plain(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# A record class's fields in sorted key order, each with the text before its value; the tag
# (``$t``, which sorts before every field name) and the ``{`` are in the first field's text.
_KEY_TEXT: dict[type, tuple[tuple[str, str], ...]] = {}


def _key_text(cls: type) -> tuple[tuple[str, str], ...]:
    head = _head(cls)
    plan: list[tuple[str, str]] = []
    for k in sorted(_FIELDS[cls]):  # identifiers: each sorts after "$t"
        plan.append((("," if plan else head + ",") + _encode_str(k) + ":", k))
    _KEY_TEXT[cls] = tuple(plan)
    return _KEY_TEXT[cls]


def _head(cls: type) -> str:
    """A record's text up to its first field: ``{"$t":"tag"``."""
    return "{" + _encode_str("$t") + ":" + _encode_str(_TAGS[cls])


# The text of big records by identity: values share them (a file's parse holds each defn's
# AST, which ``defn_ast`` returns, whose signature ``signature`` returns; an entry's graph is
# encoded in its specialisation and fingerprinted again by its report; a rebuilt value shares
# the sub-records an edit did not reach with the previous build's: the checker's memoised
# call instantiations, the cached calls an entry's graph splices), and records are frozen.
# Only a class that once gave a big text is looked up, and never a record holding a list,
# dict or set (those could change under it). The objects are kept alive while remembered, so
# an identity is never reused meanwhile. Two generations bounded by their text's size: a
# text found in the older one moves to the newer, which becomes the older once it holds
# ``_TEXT_LIMIT`` characters (what the last build or two encoded stays; the rest goes).
_BIG = 4096  # characters
_BIG_CLASSES: set[type] = set()
_TEXT_OF: dict[int, tuple[Any, str]] = {}  # the newer generation
_TEXT_OLD: dict[int, tuple[Any, str]] = {}
_TEXT_LIMIT = 8_000_000  # characters per generation
_text_size = [0]  # characters held by the newer generation
_mutable_seen = [0]  # lists, dicts, sets met so far (a record holding one is not remembered)


def _text_hit(v: Any) -> str | None:
    """The remembered text of record ``v``, or None."""
    hit = _TEXT_OF.get(id(v))
    if hit is None:
        hit = _TEXT_OLD.get(id(v))
        if hit is None or hit[0] is not v:
            return None
        _keep(v, hit[1])
        return hit[1]
    return hit[1] if hit[0] is v else None


def _keep(v: Any, text: str) -> None:
    """Remember ``text`` for ``v`` in the newer generation, turning generations over when full."""
    global _TEXT_OF, _TEXT_OLD
    if _text_size[0] >= _TEXT_LIMIT:
        _TEXT_OLD, _TEXT_OF = _TEXT_OF, {}
        _text_size[0] = 0
    _TEXT_OF[id(v)] = (v, text)
    _text_size[0] += len(text)


def _encode_into(v: Any, out: list[str]) -> None:
    """Append the canonical JSON text of ``v`` to ``out``, piece by piece: the same text as
    :func:`_reference_encode` (records, tuples, str, int, None and bools written directly,
    any other value through it), about twice as fast, without building the plain form. A
    32-layer model's graph, parse and check records are ~1.3 MB of JSON per edit."""
    t = type(v)
    if t is str:
        out.append(_encode_str(v))
    elif t is int:
        out.append(int.__repr__(v))
    elif t is tuple or t is list:
        if t is list:
            _mutable_seen[0] += 1
        if not v:
            out.append("[]")
            return
        if t is tuple and len(v) >= _RUN and (type(v[0]) in _FIELDS or type(v[0]) is tuple):
            _encode_runs(v, out)
            return
        sep = "["
        for x in v:  # str and int elements inline: a call per element is most of the cost
            out.append(sep)
            tx = type(x)
            if tx is str:
                out.append(_encode_str(x))
            elif tx is int:
                out.append(int.__repr__(x))
            else:
                _encode_into(x, out)
            sep = ","
        out.append("]")
    elif v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif t in _FIELDS:
        if t in _BIG_CLASSES:
            hit = _text_hit(v)
            if hit is not None:
                out.append(hit)
                return
        start, mutable = len(out), _mutable_seen[0]
        plan = _KEY_TEXT.get(t) or _key_text(t)
        if not plan:  # a record without fields: its tag alone
            out.append(_head(t))
        for before, name in plan:  # the tag is in the first key's text (``$t`` sorts first)
            out.append(before)
            x = getattr(v, name)
            tx = type(x)
            if tx is str:
                out.append(_encode_str(x))
            elif tx is int:
                out.append(int.__repr__(x))
            elif x is None:
                out.append("null")
            else:
                _encode_into(x, out)
        out.append("}")
        if len(out) - start > 256 and _mutable_seen[0] == mutable:
            _remember(v, t, out, start)
    else:  # floats, bytes, dicts, sets, subclasses: by definition
        if t is not float and t is not bytes:
            _mutable_seen[0] += 1
        out.append(_reference_encode(v))


# The text of runs of records (or tuples) in long tuples by the identity of their elements:
# an entry's graph is a tuple of ~1,800 nodes at L=32, rebuilt as a new tuple by every edit,
# whose unchanged calls' nodes and params are the previous build's objects (the specialiser
# reuses them), so each run of ``_RUN`` elements that are all the same objects as a run
# encoded before has the same text (records and tuples are immutable; a run that met a
# list, dict or set is not remembered). Keyed
# by the id of the run's first element, checked element by element with ``is`` (never ``==``:
# ``1 == 1.0`` but their texts differ); two generations bounded like the records' texts.
_RUN = 32  # elements per run; a tuple of fewer, or not starting with a record or tuple: plainly
_RUN_OF: dict[int, tuple[tuple[Any, ...], str]] = {}  # the newer generation
_RUN_OLD: dict[int, tuple[tuple[Any, ...], str]] = {}
_run_size = [0]  # characters held by the newer generation


def _encode_runs(v: tuple[Any, ...], out: list[str]) -> None:
    """A long tuple of records, run by run, each run's text reused when its elements are the
    objects of a run encoded before (see ``_RUN_OF``)."""
    global _RUN_OF, _RUN_OLD
    is_ = operator.is_
    sep = "["
    for i in range(0, len(v), _RUN):
        run = v[i : i + _RUN]
        out.append(sep)
        sep = ","
        key = id(run[0])
        hit = _RUN_OF.get(key)
        if hit is None:
            hit = _RUN_OLD.get(key)
        if hit is not None and len(hit[0]) == len(run) and all(map(is_, hit[0], run)):
            out.append(hit[1])
            if key not in _RUN_OF:
                _RUN_OF[key] = hit
                _run_size[0] += len(hit[1])
            continue
        start, mutable = len(out), _mutable_seen[0]
        first = True
        for x in run:
            if not first:
                out.append(",")
            first = False
            _encode_into(x, out)
        if _mutable_seen[0] != mutable:
            continue
        text = "".join(out[start:])
        out[start:] = [text]
        if _run_size[0] >= _TEXT_LIMIT:
            _RUN_OLD, _RUN_OF = _RUN_OF, {}
            _run_size[0] = 0
        _RUN_OF[key] = (run, text)
        _run_size[0] += len(text)
    out.append("]")


def _remember(v: Any, t: type, out: list[str], start: int) -> None:
    text = "".join(out[start:])
    out[start:] = [text]
    if len(text) < _BIG:
        return
    _BIG_CLASSES.add(t)
    _keep(v, text)


# A str may hold lone surrogates: a file or folder name that is not UTF-8 comes back from the
# file system that way (os.fsdecode's surrogateescape), and a workspace's name or a source's
# path is a value. Strict UTF-8 refused them (an internal error naming no file); "surrogatepass"
# writes each as its three bytes, so every str that encoded before encodes to the same bytes,
# and distinct strs still give distinct bytes.
_SURROGATES = "surrogatepass"


def encode(value: Any) -> bytes:
    """Canonical bytes of ``value`` (sorted keys, no whitespace, UTF-8)."""
    out: list[str] = []
    _encode_into(value, out)
    return "".join(out).encode("utf-8", _SURROGATES)


def decode(data: bytes) -> Any:
    """Inverse of :func:`encode`; raises :class:`CodecError` on anything malformed."""
    try:
        plain = json.loads(data.decode("utf-8", _SURROGATES))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise CodecError(f"not canonical JSON: {e}") from None
    try:
        return _from_plain(plain)
    except (TypeError, ValueError, KeyError, RecursionError) as e:
        if isinstance(e, CodecError):
            raise
        raise CodecError(str(e)) from None


def digest(data: bytes) -> str:
    """Hex BLAKE2b-128 digest of raw bytes: the fingerprint function everywhere in kinac."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def pack(value: Any) -> bytes:
    """The stored form of a value: ``B`` + raw bytes for ``bytes``, else ``J`` + canonical JSON."""
    if type(value) is bytes:
        return b"B" + value
    return b"J" + encode(value)


def unpack(blob: bytes) -> Any:
    """Inverse of :func:`pack`; raises :class:`CodecError` on anything malformed."""
    tag = blob[:1]
    if tag == b"B":
        return blob[1:]
    if tag == b"J":
        return decode(blob[1:])
    raise CodecError("unknown blob tag")


def fingerprint(value: Any) -> str:
    """Fingerprint of a value: the digest of its packed form (so a blob's key is its checksum)."""
    return digest(pack(value))


def fields_of(cls: type) -> tuple[str, ...]:
    """Names of a record class's fields, in declaration order."""
    return _FIELDS[cls]
