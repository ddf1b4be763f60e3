"""``kinac run``'s flags for the dims and dtypes it runs at (``--dims``, ``--dtypes``) and what
``--inputs`` arrays fix of them (:mod:`kinac.run`): parsed strictly, checked against a
kina.toml entry's fixed values, and a missing one named with the flag that gives it.
"""

from __future__ import annotations

from typing import Any

from kinac.errors import KinaUsageError


def _parse_pairs(flag: str, text: str | None) -> dict[str, str]:
    """``K=V,K=V`` (``--dims``, ``--dtypes``) as a dict of stripped strings."""
    out: dict[str, str] = {}
    if text is None:
        return out
    for part in text.split(","):
        if not part.strip():  # `,,,`, `N=2,,D=3`, a trailing comma: a slip, not "no pairs"
            raise KinaUsageError(
                f"{flag} takes NAME=VALUE pairs separated by single commas, got {text!r} "
                "(an empty pair)"
            )
        k, eq, v = (x.strip() for x in part.partition("="))
        if not eq or not k or not v:
            raise KinaUsageError(
                f"{flag} takes NAME=VALUE pairs separated by commas, got {part.strip()!r}"
            )
        if k in out:
            raise KinaUsageError(f"{flag} gives `{k}` twice")
        out[k] = v
    return out


def parse_dims(text: str | None) -> dict[str, Any]:
    """``--dims``: positive ints; a variadic group ``..b`` takes ``..b=4x128``."""
    out: dict[str, Any] = {}
    for k, v in _parse_pairs("--dims", text).items():
        parts = v.split("x") if k.startswith("..") else [v]
        if not all(x.isascii() and x.isdigit() and int(x) >= 1 for x in parts):  # not "４"
            raise KinaUsageError(
                f"--dims takes NAME=POSITIVE_INT pairs (a group: ..b=4x128), got {f'{k}={v}'!r}"
            )
        out[k] = tuple(int(x) for x in parts) if k.startswith("..") else int(v)
    return out


def parse_dtypes(text: str | None) -> dict[str, str]:
    """``--dtypes``: Kina dtype names (``T=f32``)."""
    from kinac.workspace.schema import DTYPE_NAMES

    pairs = _parse_pairs("--dtypes", text)
    for k, v in pairs.items():
        if v not in DTYPE_NAMES:
            raise KinaUsageError(
                f"--dtypes: `{k}={v}`: {v!r} is not a Kina dtype (one of {' '.join(DTYPE_NAMES)})"
            )
    return pairs


def agree_with_entry(fn: Any, dims: dict[str, Any], dtypes: dict[str, str]) -> None:
    """``--dims``/``--dtypes`` for a kina.toml entry may repeat what the entry fixes, not
    contradict it: the inputs were drawn at the flag's dims and then refused as arguments
    ("argument `x` has shape [1, ...]"), naming an argument the user never gave."""
    fixed = {**dict(fn.fixed.dims), **dict(fn.fixed.dtypes)}
    said = {**dims, **dtypes}
    clash = [k for k in sorted(said) if k in fixed and said[k] != fixed[k]]
    if clash:
        flag = "--dims" if clash[0] in dims else "--dtypes"
        shown = lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else v  # noqa: E731
        raise KinaUsageError(
            f"{flag} {','.join(f'{k}={shown(said[k])}' for k in clash)}: kina.toml's entry "
            f"`{fn.fixed.name}` fixes {', '.join(f'{k} = {shown(fixed[k])}' for k in clash)}; "
            f"change it there, or add another [[entry]] of `{fn.fixed.defn}` at these values"
        )


def require_flags(name: str, sig: Any, dims: dict[str, Any], dtypes: dict[str, str]) -> None:
    """A plain defn (not a ``kina.toml`` entry) run without a value for one of its dims or
    dtype variables: a usage error that says which flag to pass (the checker's K0802 help
    speaks of ``kina.toml``'s entry dims, which is not where a command-line run gets them)."""
    from kinac.check.bind import unbound

    no_dims, no_dtypes = unbound(sig, dims, dtypes)
    said = []
    if no_dims:
        group = (
            " (a variadic group as ..b=4x128)" if any(d.startswith("..") for d in no_dims) else ""
        )
        said.append("pass --dims " + ",".join(f"{d}=..." for d in no_dims) + group)
    if no_dtypes:
        said.append("pass --dtypes " + ",".join(f"{t}=..." for t in no_dtypes) + " (e.g. f32)")
    if said:
        missing = ", ".join(f"`{x}`" for x in (*no_dims, *no_dtypes))
        raise KinaUsageError(
            f"`{name}` is not a kina.toml entry and {missing} "
            f"{'has' if len(no_dims) + len(no_dtypes) == 1 else 'have'} no value: {'; '.join(said)}"
        )


def bind_inputs(
    fn: Any, arrays: list[Any], given_dims: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, str]]:
    """The dims and dtype variables a plain defn's ``--inputs`` arrays fix, as
    ``kinac.compile`` takes them from its arguments, so ``--dims`` is needed only for what the
    arrays do not determine (dim parameters, dims only a ``where`` clause or the result
    names). Arrays that disagree with each other are a call error naming the dissenters."""
    from kinac.api_types import arg_type
    from kinac.check import bind_call_types

    missing = [p.name for p in fn.signature.params if p.is_dim and p.name not in given_dims]
    types = tuple(arg_type(a, n) for a, n in zip(arrays, fn.tensor_params, strict=True))
    if missing:
        # The dim parameters come from --dims only, and require_flags asks for them; what the
        # arrays fix whatever the missing ones are (the same at two placeholders) is not asked.
        seen: list[dict[str, Any]] = []
        dtypes: dict[str, str] = {}
        for placeholder in (1, 2):
            b = bind_call_types(
                fn.key.file,
                fn.signature,
                types,
                {**given_dims, **dict.fromkeys(missing, placeholder)},
            )
            if isinstance(b, tuple):
                return {}, {}
            seen.append(dict(b.dims))
            dtypes = dict(b.dtypes)
        fixed = {k: v for k, v in seen[0].items() if k not in missing and seen[1].get(k) == v}
        return fixed, dtypes
    bound = fn._bind(types, given_dims)
    return dict(bound.dims), dict(bound.dtypes)
