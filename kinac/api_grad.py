"""``kinac.value_and_grad(path, name, wrt=[...])``: a compiled loss and its gradients.

The callable takes the defn's arguments exactly as :func:`kinac.compile`'s does (dims bound
from the arrays' shapes, one specialisation per distinct set of dims, the same checks and
messages) and returns ``(value, {name: gradient})``. The gradient graph is the pipeline's
``grad_graph`` query (:mod:`kinac.pipeline_grad`), compiled through the same cached kernel
queries as every entry. The loss must be a scalar (rank 0) float; ``wrt`` must name distinct
float tensor parameters: anything else is a :class:`KinaUsageError` before anything runs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from kinac.api import CompiledDefn
from kinac.api_build import check_devices, check_fixed_dims, check_fixed_shapes
from kinac.dtypes import FLOAT_DTYPES
from kinac.errors import KinaCallError, KinaCompileError, KinaUsageError


class GradEntry:
    """A loaded value-and-gradient entry: its outputs as ``(value, {name: gradient})``."""

    def __init__(self, entry: Any, wrt: tuple[str, ...]) -> None:
        self.entry, self.wrt = entry, wrt

    def __call__(self, *arrays: Any) -> tuple[Any, dict[str, Any]]:
        outs = self.entry(*arrays)
        return outs[0], dict(zip(self.wrt, outs[1:], strict=True))


class ValueAndGrad(CompiledDefn):
    """A loss defn (or kina.toml entry) differentiated with respect to ``wrt``."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        name: str,
        wrt: Sequence[str] | None = None,
        target: str = "cpu",
        **options: Any,
    ) -> None:
        if wrt is not None and (isinstance(wrt, str) or not all(isinstance(w, str) for w in wrt)):
            raise KinaUsageError(
                f"wrt must be a list of parameter names, e.g. wrt=['w1', 'b1'], got {wrt!r}"
            )
        super().__init__(path, name, target=target, **options)
        if wrt is None:  # a kina.toml entry's `grad = [...]`
            wrt = self.fixed.grad if self.fixed is not None else ()
            if not wrt:
                raise KinaUsageError(
                    f"value_and_grad({name!r}) needs wrt=[...]: name the parameters to "
                    "differentiate (or give the kina.toml entry `grad = [...]`)"
                )
        self.wrt = tuple(wrt)
        if not self.wrt:
            raise KinaUsageError("wrt is empty: name the parameters to differentiate")
        if len(set(self.wrt)) != len(self.wrt):
            raise KinaUsageError(f"wrt names a parameter twice: {list(self.wrt)}")
        self._check_signature()

    def _check_signature(self) -> None:
        """What the signature already decides: a known non-scalar return, an unknown or
        non-float parameter in ``wrt`` (a dtype variable is checked at each specialisation)."""
        from kinac.pipeline_support import did_you_mean
        from kinac.reader.ast import DimVariadic

        sig = self.signature
        ret = sig.ret
        if ret.dims and not any(isinstance(d, DimVariadic) for d in ret.dims):
            raise KinaUsageError(
                f"`{sig.name}` returns a tensor of rank {len(ret.dims)}: value_and_grad needs a "
                "scalar loss (declare `-> f32` and reduce the result, e.g. with `mean`)"
            )
        if ret.dtype not in FLOAT_DTYPES and ret.dtype in ("i32", "i64", "bool"):
            raise KinaUsageError(
                f"`{sig.name}` returns {ret.dtype}: value_and_grad needs a float loss"
            )
        types = {p.name: p.type for p in sig.params if not p.is_dim}
        for w in self.wrt:
            if w not in types:
                dims = [p.name for p in sig.params if p.is_dim]
                what = " (a dim parameter: dims have no gradient)" if w in dims else ""
                raise KinaUsageError(
                    f"`{sig.name}` has no tensor parameter `{w}`{what}"
                    + did_you_mean(w, list(types))
                    + f"\n  its tensor parameters: {', '.join(types)}"
                )
            t = types[w]
            if t is not None and t.dtype in ("i32", "i64", "bool"):
                raise KinaUsageError(
                    f"cannot differentiate `{sig.name}` with respect to `{w}`: it is "
                    f"{t.dtype}; gradients exist only for float parameters"
                )

    def _specialise(self, types: tuple[Any, ...], dim_args: dict[str, int]) -> Any:
        from kinac import pipeline, pipeline_grad

        check_devices(self, types)
        check_fixed_shapes(self, types)
        bound = self._bind(types, dim_args)
        check_fixed_dims(self, bound)
        entry = pipeline.EntryKey(
            self.key.file, self.key.name, bound.dims, bound.dtypes, self.target
        )
        key = (entry, self.wrt)
        db = self.sess.db
        code: Any
        artifact: Any  # PTX text for cuda, object code for the host
        try:
            spec = pipeline_grad.grad_graph(db, key)
            if spec.graph is None:
                if spec.problem is not None:
                    raise KinaUsageError(spec.problem)
                raise KinaCallError(self._render(list(spec.diagnostics)))
            if self.target == "cuda":
                try:
                    code = pipeline_grad.grad_gpu_lowered(db, key)
                    artifact = pipeline_grad.grad_ptx(db, key)
                except NotImplementedError as e:
                    raise KinaCompileError(
                        f"the CUDA back end cannot compile this gradient: {e}"
                    ) from None
            else:
                code = pipeline_grad.grad_lowered(db, key)
                artifact = pipeline_grad.grad_object_code(db, key)
        finally:
            db.commit()
            db.close()
        assert code is not None and artifact is not None
        if self.target == "cuda":
            from kinac.rt.cuda.entry import load_gpu_entry

            return GradEntry(load_gpu_entry(code, artifact, **self.gpu_options), self.wrt)
        from kinac.rt.host import load_entry

        return GradEntry(load_entry(code, artifact), self.wrt)

    def __repr__(self) -> str:
        return (
            f"<kinac value_and_grad {self.key.name} wrt {list(self.wrt)} from {self.key.file} "
            f"for {self.target}>"
        )


def value_and_grad(
    path: str | os.PathLike[str],
    name: str,
    wrt: Sequence[str] | None = None,
    target: str = "cpu",
    mesh: Any = None,
    **options: Any,
) -> Any:
    """Compile loss ``name`` of the workspace or file at ``path`` with its gradients with respect
    to the parameters ``wrt`` (default: the kina.toml entry's ``grad`` list); calling the result
    returns ``(value, {name: gradient})``. With ``mesh=`` (as ``kinac.compile``'s), it runs on the
    simulated mesh and returns global arrays (:mod:`kinac.api_grad_sharded`)."""
    if mesh is not None:
        from kinac.api_grad_sharded import value_and_grad_sharded

        return value_and_grad_sharded(path, name, wrt, mesh, target=target, **options)
    return ValueAndGrad(path, name, wrt, target=target, **options)
