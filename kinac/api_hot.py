"""What the hot and fast paths of a compiled defn's call read (:class:`kinac.api.CompiledDefn`):
the form of a call's arguments (the fast path's key) and what its arrays may change in place
while staying the same objects (the hot path's state: a torch tensor's ``_version``, any other
array's shape and dtype)."""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection, Sequence
from typing import Any

from kinac.api_types import array_device

VERSION = operator.attrgetter("_version")
SHAPE_DTYPE = operator.attrgetter("shape", "dtype")


def state_reader(
    arrays: Sequence[Any], skip: Collection[int] = ()
) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """How the hot path reads what the arrays at these positions may change in place: a torch
    tensor's ``_version``, any other array's shape and dtype, each position by its own kind;
    none of the positions in ``skip`` (the entry's bound call checks their form itself and
    answers :data:`MISS` when it changed)."""
    pos = [i for i in range(len(arrays)) if i not in skip]
    if len(pos) < len(arrays):
        if not pos:
            return lambda xs: ()
        get = operator.itemgetter(*pos) if len(pos) > 1 else (lambda xs: (xs[pos[0]],))
        if len(pos) > 1 and all(hasattr(arrays[i], "_version") for i in pos):
            # torch tensors besides the vouched arrays (a staged x and its weights): the hot
            # path reads their versions inline through this getter (kinac.compile's __call__)
            return get  # type: ignore[return-value]
        inner = state_reader([arrays[i] for i in pos])
        return lambda xs: inner(get(xs))
    if all(hasattr(a, "_version") for a in arrays):

        def versions(xs: Sequence[Any]) -> tuple[Any, ...]:
            return tuple(map(VERSION, xs))

        return versions
    getters = tuple(VERSION if hasattr(a, "_version") else SHAPE_DTYPE for a in arrays)
    if VERSION not in getters:
        return lambda xs: tuple(map(SHAPE_DTYPE, xs))
    vpos = [i for i, g in enumerate(getters) if g is VERSION]
    spos = [i for i, g in enumerate(getters) if g is not VERSION]
    if len(vpos) > 1 and len(spos) == 1:  # (a numpy x among torch tensors, the usual mix)
        vget, j = operator.itemgetter(*vpos), spos[0]
        return lambda xs: (*map(VERSION, vget(xs)), SHAPE_DTYPE(xs[j]))
    return lambda xs: tuple(map(operator.call, getters, xs))


ITEMS = operator.itemgetter


def read_state(state: Any, arrays: Sequence[Any]) -> tuple[Any, ...]:
    """What the hot path compares, read by the memo's ``state``: None, every array's torch
    version; an itemgetter, the versions of the arrays it picks; else ``state(arrays)``."""
    if state is None:
        return tuple(map(VERSION, arrays))
    if type(state) is ITEMS:
        return tuple(map(VERSION, state(arrays)))
    return state(arrays)  # type: ignore[no-any-return]


def fast_key(args: tuple[Any, ...], dims: dict[str, Any]) -> tuple[Any, ...]:
    """The form of a call's arguments (AttributeError when an argument has no cheap form: then
    the call takes the full path, which reports whatever is wrong).

    An array contributes ``(type, dtype, shape, device)``, a positional dim ``(int, value)``;
    keyword dims add ``(name, type, value)`` each, so ``True`` is never taken for ``1``."""
    try:
        key = tuple(
            [(int, a) if type(a) is int else (type(a), a.dtype, a.shape, a.device) for a in args]
        )
    except AttributeError:  # no .device (numpy before 2.0, other DLPack producers)
        key = tuple(
            [
                (int, a) if type(a) is int else (type(a), a.dtype, a.shape, array_device(a))
                for a in args
            ]
        )
    if dims:
        return (key, tuple([(k, type(v), v) for k, v in dims.items()]))
    return (key,)


def form_moved(memo: tuple[Any, ...], args: tuple[Any, ...], dims: dict[str, Any]) -> bool:
    """After a hot call raised: whether the arguments' form is no longer the one the memo
    was made for (then the call is redone on the fast or full path), or it is (the error
    is the call's own: a runtime check, raised as it is)."""
    try:
        return fast_key(args, dims) != memo[11]
    except (AttributeError, TypeError):
        return True
