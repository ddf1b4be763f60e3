"""How a call's arguments divide into arrays and dims (:class:`kinac.api.CompiledDefn`):
arrays positional in declared order, dims positional in their place or by keyword, each
mistake a call error naming the parameter. Pure over the defn's signature, so the compiled,
sharded and differentiated calls divide their arguments alike."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kinac.api_types import brief
from kinac.errors import KinaCallError


def split_call(
    defn: str, params: Sequence[Any], args: tuple[Any, ...], dims: dict[str, int]
) -> tuple[list[Any], dict[str, int], tuple[int, ...]]:
    """The call's arrays (in parameter order), its dims (positional and keyword) and the
    positions in ``args`` of the arrays (the fast path passes ``args`` at those positions
    straight to the entry on later calls): ``defn`` is the defn's name, ``params`` its
    signature's parameters. A call that does not fit is a :class:`KinaCallError`."""
    tensor_params = [p.name for p in params if not p.is_dim]
    dim_params = [p.name for p in params if p.is_dim]
    arrays: list[Any] = []
    where: list[int] = []
    dim_args = dict(dims)
    for k, v in dims.items():  # bool and float are not dims (True would bind 1)
        if k in tensor_params:
            raise KinaCallError(_array_by_keyword(defn, tensor_params, k))
        if k not in dim_params:  # the binder would ignore it: N=5 beside a [4] array
            raise KinaCallError(
                f"`{defn}` has no dim parameter `{k}` (dim parameters: "
                f"{', '.join(dim_params) or 'none'}; other dims are bound from the "
                "arrays' shapes)"
            )
        if not isinstance(v, int) or isinstance(v, bool):
            raise KinaCallError(f"the dim parameter `{k}` must be a positive int, got {brief(v)}")
    n_dims_positional = len(args) - len(tensor_params)
    i = 0
    for p in params:
        if p.is_dim:
            if p.name in dim_args:
                continue
            if n_dims_positional <= 0:
                raise KinaCallError(
                    f"`{defn}` needs the dim parameter `{p.name}` "
                    f"(pass it positionally, in declared order, or as {p.name}=...)"
                )
            if i >= len(args):
                break
            v = args[i]
            i += 1
            n_dims_positional -= 1
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise KinaCallError(
                    f"the dim parameter `{p.name}` must be a positive int, got {brief(v)}"
                )
            dim_args[p.name] = v
        else:
            if i >= len(args):
                raise KinaCallError(
                    f"`{defn}` takes {len(tensor_params)} arrays "
                    f"({', '.join(tensor_params)}), got {len(arrays)}"
                )
            arrays.append(args[i])
            where.append(i)
            i += 1
    if i < len(args):
        raise KinaCallError(
            f"`{defn}` takes {len(tensor_params)} arrays "
            f"({', '.join(tensor_params)}), got {len(arrays) + len(args) - i}"
        )
    return arrays, dim_args, tuple(where)


def _array_by_keyword(defn: str, tensor_params: Sequence[str], k: str) -> str:
    """An array passed by keyword: arrays are positional (the hot and fast paths key calls
    by position), so say so, never "the dim parameter must be a positive int"."""
    return (
        f"`{k}` is an array parameter of `{defn}`: pass arrays positionally, in "
        f"declared order ({defn}({', '.join(tensor_params)})); keywords name "
        "dims only"
    )
