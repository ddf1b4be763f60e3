"""What a training entry takes: its data, its weights, their types, and their first values.

A training entry is a defn returning an f32 scalar loss whose tensor parameters are, by name,
``tokens`` and ``targets`` (``i32 [B S]``: the data), optionally ``scale`` (a rank-0 f32: the
loss scale of mixed precision), and weights: every other float parameter. The types come from
the entry's concrete graph (``kina.toml`` dims), so nothing is guessed from names but the roles.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kinac.dtypes import FLOAT_DTYPES
from kinac.errors import KinaUsageError

DATA = ("tokens", "targets")
SCALE = "scale"


@dataclass(frozen=True)
class ParamInfo:
    """A tensor parameter of a training entry: its name, dtype and shape."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class EntryInfo:
    """A training entry's parameters in order, its dims (dim parameters are passed by name)."""

    params: tuple[ParamInfo, ...]
    dims: dict[str, int]
    dim_params: tuple[str, ...]
    f16: bool = False  # the loss computes in f16 somewhere: dynamic loss scaling by default

    @property
    def weights(self) -> tuple[ParamInfo, ...]:
        return tuple(p for p in self.params if p.name not in (*DATA, SCALE))

    @property
    def n_weights(self) -> int:
        return sum(p.numel for p in self.weights)

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return next(p.shape for p in self.params if p.name == "tokens")

    @property
    def vocab(self) -> int:
        return int(self.dims["V"])

    @property
    def amp(self) -> bool:
        return any(p.name == SCALE for p in self.params)


def entry_info(workspace: str, entry: str, target: str = "cpu", **options: Any) -> EntryInfo:
    """The parameters of ``kina.toml`` entry ``entry``, checked against the roles above."""
    from kinac import pipeline
    from kinac.api import compile as compile_defn

    cd = compile_defn(workspace, entry, target=target, **options)
    if cd.fixed is None:
        raise KinaUsageError(
            f"`{entry}` is not an entry of {workspace}'s kina.toml: training needs an entry "
            f"(its dims size the model)"
        )
    key = pipeline.EntryKey(cd.key.file, cd.key.name, cd.fixed.dims, cd.fixed.dtypes, target)
    try:
        spec = pipeline.entry_graph(cd.sess.db, key)
    finally:
        cd.sess.db.commit()
        cd.sess.db.close()
    if spec.graph is None:
        raise KinaUsageError(cd._render(list(spec.diagnostics)))
    g = spec.graph
    params = tuple(ParamInfo(n, t.dtype, tuple(t.shape)) for n, t in g.params)
    dims = {k: v for k, v in cd.fixed.dims if isinstance(v, int)}  # no variadic groups here
    f16 = any(n.type.dtype == "f16" for n in g.nodes)
    info = EntryInfo(params, dims, tuple(cd.dim_params), f16)
    _check_roles(entry, info, g.nodes[g.outputs[0]].type)
    return info


def _check_roles(entry: str, info: EntryInfo, result: Any) -> None:
    names = {p.name: p for p in info.params}
    problems = []
    for n in DATA:
        p = names.get(n)
        if p is None or p.dtype != "i32" or len(p.shape) != 2:
            problems.append(f"a parameter `{n} : (tensor i32 [B S])`")
    if "V" not in info.dims:
        problems.append("a vocabulary dim `V` in its kina.toml dims")
    if result.dtype != "f32" or tuple(result.shape) != ():
        problems.append("an f32 scalar result (the loss)")
    s = names.get(SCALE)
    if s is not None and (s.dtype != "f32" or s.shape != ()):
        problems.append(f"`{SCALE}` as a rank-0 f32 (the loss scale)")
    bad = [p.name for p in info.weights if p.dtype not in FLOAT_DTYPES]
    if bad:
        problems.append(f"float weights only (not {', '.join(bad)})")
    if not info.weights:
        problems.append("at least one weight to train")
    if problems:
        raise KinaUsageError(f"entry `{entry}` cannot be trained: it needs " + "; ".join(problems))


def init_weights(info: EntryInfo, seed: int) -> dict[str, Any]:
    """First values, deterministic in ``seed``: rank-1 weights (norm gains) are 1, the others
    ``N(0, 1 / fan_in)`` with ``fan_in`` their first dim (an embedding table ``N(0, 1/V)``)."""
    import numpy as np

    rng = np.random.default_rng([seed, 0x7EA1])
    out: dict[str, Any] = {}
    for p in info.weights:
        if p.dtype not in ("f32", "f64"):
            raise KinaUsageError(
                f"weight `{p.name}` is {p.dtype}: train with f32 master weights (an entry like "
                f"workspaces/decoder's decoder-loss-bf16 casts them to the compute dtype)"
            )
        if len(p.shape) <= 1:
            w = np.ones(p.shape)
        else:
            w = rng.standard_normal(p.shape) / math.sqrt(p.shape[0])
        # np.array, not np.ascontiguousarray: that one makes a rank-0 weight (a learned
        # temperature, a scalar gain) [1], and every step's call then refused its shape
        out[p.name] = np.array(w, dtype=np.float32 if p.dtype == "f32" else np.float64, order="C")
    return out
