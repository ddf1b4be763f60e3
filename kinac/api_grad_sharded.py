"""``kinac.value_and_grad(path, name, wrt=[...], mesh=...)``: a loss and its gradients run as a
per-device program on the threaded mesh simulator, with global arrays in and out.

Why a subclass of :class:`kinac.api_sharded.ShardedDefn`: binding, argument checks, the mesh
request (a name, a device count, a shape; a resized mesh re-planned), slicing the global
arguments by the parameters' layouts, the simulator and assembling the outputs are exactly a
sharded forward call's; what differs is the program: the gradient graph's
(``grad_device_program``, :mod:`kinac.pipeline_grad_shard`), whose outputs are the loss
(replicated) and each gradient in its parameter's layout, assembled into global arrays.

:class:`MeshValueAndGrad` is the same with layouts given from Python instead of annotations
(``layouts={"x": [("dp",), (), ()], ...}`` over a :class:`MeshSpec`): what the trainer uses to
run an unannotated model data-parallel, tensor-parallel or 2-D (:func:`mesh_value_and_grad`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from kinac.api_mesh import DEFAULT_TIMEOUT_S, check_divisible, shape_text
from kinac.api_sharded import ShardedDefn
from kinac.api_sharded_types import ArgTypes
from kinac.errors import KinaCallError, KinaCompileError, KinaUsageError

Layouts = Mapping[str, Sequence[Sequence[str]]]


class ShardedValueAndGrad(ShardedDefn):
    """A loss differentiated with respect to ``wrt``, run on a simulated mesh: calls return
    ``(value, {name: gradient})`` as global arrays."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        name: str,
        wrt: Sequence[str] | None,
        mesh: Any,
        target: str = "cpu",
        cache_dir: str | None = None,
        no_cache: bool = False,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        bucket_mb: float | None = None,
    ) -> None:
        from kinac.api_grad import ValueAndGrad

        self.bucket_bytes = _bucket_bytes(bucket_mb)
        if target != "cpu":
            raise KinaUsageError(
                "a sharded gradient runs on the threaded simulator, on the host: use "
                "target='cpu' (running on several GPUs through NCCL is not built yet)"
            )
        inner = ValueAndGrad(path, name, wrt, cache_dir=cache_dir, no_cache=no_cache)
        self.wrt: tuple[str, ...] = inner.wrt
        super().__init__(path, name, mesh, compiled=inner, timeout_s=timeout_s)

    def __call__(self, *args: Any, **dims: int) -> tuple[Any, dict[str, Any]]:  # type: ignore[override]
        outs = super().__call__(*args, **dims)
        return outs[0], dict(zip(self.wrt, outs[1:], strict=True))

    def _grad_graph(self, db: Any, gkey: Any) -> Any:
        from kinac import pipeline_grad

        spec = pipeline_grad.grad_graph(db, gkey)
        if spec.graph is None:
            if spec.problem is not None:
                raise KinaUsageError(spec.problem)
            raise KinaCallError(self.inner._render(list(spec.diagnostics)))
        return spec.graph

    def _build(self, key: Any) -> tuple[Any, list[Any]]:
        from kinac import pipeline_grad_shard, pipeline_shard

        db = self.inner.sess.db
        gkey = (key, self.wrt)
        try:
            graph = self._grad_graph(db, gkey)
            gp = pipeline_grad_shard.grad_shard_propagate(db, gkey)
            assert gp is not None, "a gradient graph has a plan"
            errors = [d for d in gp.plan.diagnostics if d.is_error]
            if errors:
                raise KinaCompileError(self.inner._render(errors))
            plan = gp.plan
            req = self._settle_plan(plan.mesh)
            if plan.mesh is None:
                program = self._replicated(graph, req)
            elif req is None or isinstance(req, str) or req == tuple(n for _, n in plan.axes):
                program = pipeline_grad_shard.grad_device_program(db, gkey)
            else:
                program = self._resized_grad(db, key, graph, plan.mesh, req)
            assert program is not None, "a plan with a mesh and no error has a program"
            program = self._bucketed(program)
            segments = pipeline_shard.host_segments(db, program)
        finally:
            db.commit()
            db.close()
        return program, segments

    def _bucketed(self, program: Any) -> Any:
        """``program`` with its runs of all-reduces bucketed when ``bucket_mb`` asks for it."""
        if not self.bucket_bytes:
            return program
        from kinac.shard.grad_bucket import bucket_all_reduces

        return bucket_all_reduces(program, self.bucket_bytes)

    def _resized_grad(
        self, db: Any, key: Any, graph: Any, name: str, shape: tuple[int, ...]
    ) -> Any:
        """The gradient program for the annotations' mesh resized to ``shape`` (re-planned per
        call shape, not cached, as a resized forward is)."""
        from kinac import pipeline
        from kinac.shard.grad import plan_gradient_entry

        meshes = tuple(replace(m, shape=shape) if m.name == name else m for m in self._meshes())
        sig = pipeline.signature(db, pipeline.DefnKey(key.file, key.defn))
        assert sig is not None, "an entry that specialised has a signature"
        graph, plan, outs = plan_gradient_entry(graph, self.wrt, sig, meshes, key.file)
        errors = [d for d in plan.diagnostics if d.is_error]
        if errors:  # said against the resized mesh, which the source does not show
            raise KinaCompileError(
                f"on mesh `{name}` resized to {shape_text(shape)}:\n" + self.inner._render(errors)
            )
        check_divisible(graph, plan, f"mesh `{name}` resized to {shape_text(shape)}")

        def span_of(label: Any) -> str:
            span = pipeline.resolve_span(db, label.loc) if label is not None else None
            return f"{span.file}:{span.line}:{span.col}" if span is not None else ""

        from kinac.shard.device import device_program

        return device_program(graph, plan, span_of, outs)

    def __repr__(self) -> str:
        req = "its own mesh" if self.request is None else f"mesh {self.request!r}"
        return (
            f"<kinac sharded value_and_grad {self.key.name} wrt {list(self.wrt)} from "
            f"{self.key.file} on {req}>"
        )


def _check_mesh_spec(mesh: Any) -> None:
    """A ``MeshSpec`` from Python: one positive size per axis, distinct axis names."""
    shape, axes = tuple(mesh.shape), tuple(mesh.axes)
    ok_sizes = all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in shape)
    if not shape or not ok_sizes:
        raise KinaUsageError(f"mesh `{mesh.name}`: every size must be an integer >= 1, got {shape}")
    if len(axes) != len(shape) or not all(isinstance(a, str) and a for a in axes):
        raise KinaUsageError(
            f"mesh `{mesh.name}` has shape {shape}: it needs {len(shape)} axis names, got {axes}"
        )
    if len(set(axes)) != len(axes):
        raise KinaUsageError(f"mesh `{mesh.name}` names an axis twice: {axes}")


def _checked_layouts(mesh: Any, layouts: Any) -> dict[str, tuple[tuple[str, ...], ...]]:
    """``layouts=`` as ``{param: (axes of dim 0, axes of dim 1, ...)}``, or a usage error
    naming what is malformed (a string where a dim's axes go reads as its letters)."""
    if not isinstance(layouts, Mapping):
        raise KinaUsageError(f"layouts= maps parameter names to layouts, got {layouts!r}")
    out: dict[str, tuple[tuple[str, ...], ...]] = {}
    for pname, dims in layouts.items():
        shape = (
            "one entry per dim of the parameter, each a tuple of mesh axes (() for whole), "
            f"e.g. [({mesh.axes[0]!r},), ()]"
        )
        if isinstance(dims, str) or not isinstance(dims, Sequence):
            raise KinaUsageError(f"layouts[{pname!r}] = {dims!r}: give {shape}")
        if any(isinstance(d, str) or not isinstance(d, Sequence) for d in dims):
            raise KinaUsageError(f"layouts[{pname!r}] = {dims!r}: give {shape}")
        out[str(pname)] = tuple(tuple(d) for d in dims)
    return out


def _bucket_bytes(bucket_mb: float | None) -> int:
    """``bucket_mb`` (None or 0: no bucketing) in bytes, or a usage error."""
    if bucket_mb is None or bucket_mb == 0:
        return 0
    if (
        isinstance(bucket_mb, bool)
        or not isinstance(bucket_mb, int | float)
        or not 0 <= bucket_mb < float("inf")  # NaN too (int() of it was a ValueError)
    ):
        raise KinaUsageError(f"bucket_mb takes a size in MB (e.g. 25), got {bucket_mb!r}")
    return max(1, int(bucket_mb * 1024 * 1024))


class MeshValueAndGrad(ShardedValueAndGrad):
    """:class:`ShardedValueAndGrad` with the mesh and the parameters' layouts given from Python
    (no annotation needed in the source): ``mesh`` a ``MeshSpec``, ``layouts`` the mesh axes
    splitting each dim of the named parameters (the others replicated)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        name: str,
        wrt: Sequence[str] | None,
        mesh: Any,
        layouts: Layouts,
        cache_dir: str | None = None,
        no_cache: bool = False,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        bucket_mb: float | None = None,
    ) -> None:
        from kinac.api_grad import ValueAndGrad
        from kinac.artifacts.sharded import MeshSpec

        self.bucket_bytes = _bucket_bytes(bucket_mb)
        if not isinstance(mesh, MeshSpec):
            raise KinaUsageError(f"layouts= needs mesh= as a MeshSpec, got {mesh!r}")
        _check_mesh_spec(mesh)
        self.mesh_spec = mesh
        self.layouts = _checked_layouts(mesh, layouts)
        for pname, dims in self.layouts.items():
            for axes in dims:
                bad = [a for a in axes if a not in mesh.axes]
                if bad:
                    raise KinaUsageError(
                        f"layout of `{pname}` names mesh axis `{bad[0]}`; mesh `{mesh.name}` "
                        f"has axes {', '.join(mesh.axes)}"
                    )
            seen = [a for axes in dims for a in axes]
            twice = next((a for a in seen if seen.count(a) > 1), None)
            if twice is not None:
                raise KinaUsageError(
                    f"layout of `{pname}` uses mesh axis `{twice}` twice: a mesh axis splits "
                    "at most one dim of a tensor, once"
                )
        inner = ValueAndGrad(path, name, wrt, cache_dir=cache_dir, no_cache=no_cache)
        self.wrt = inner.wrt
        known = {p.name for p in inner.signature.params}
        unknown = [p for p in self.layouts if p not in known]
        if unknown:
            raise KinaUsageError(f"layouts= names `{unknown[0]}`, not a parameter of `{name}`")
        self.inner, self.key, self.timeout_s = inner, inner.key, timeout_s
        # what ShardedDefn.__init__ (not called: the mesh comes from Python) would set
        self.target, self.backend, self.dist = "cpu", "simulator", None
        self.request = tuple(mesh.shape)
        self.last_log: Any = None
        self.last_program: Any = None
        self._runs: dict[Any, tuple[Any, list[Any]]] = {}
        self._arg_types = ArgTypes()

    def _build(self, key: Any) -> tuple[Any, list[Any]]:
        from kinac import pipeline_shard
        from kinac.reader import ast
        from kinac.shard.device import device_program
        from kinac.shard.grad import explicit_pins, plan_gradient

        db = self.inner.sess.db
        m = self.mesh_spec
        try:
            graph = self._grad_graph(db, (key, self.wrt))
            for pname, t in graph.params:
                dims = self.layouts.get(pname)
                if dims is not None and len(dims) != len(t.shape):
                    raise KinaUsageError(
                        f"layout of `{pname}` has {len(dims)} dims; `{pname}` is "
                        f"{t.dtype}[{' '.join(map(str, t.shape))}]"
                    )
            mesh = ast.Mesh(-1, m.name, tuple(m.shape), tuple(m.axes))
            pins = explicit_pins(graph, self.layouts)
            graph, plan, outs = plan_gradient(graph, self.wrt, mesh, pins)
            errors = [d for d in plan.diagnostics if d.is_error]
            if errors:
                raise KinaCompileError(self.inner._render(errors))
            check_divisible(graph, plan, f"mesh `{m.name}` ({shape_text(tuple(m.shape))})")
            program = self._bucketed(device_program(graph, plan, lambda _: "", outs))
            segments = pipeline_shard.host_segments(db, program)
        finally:
            db.commit()
            db.close()
        return program, segments


def value_and_grad_sharded(
    path: str | os.PathLike[str],
    name: str,
    wrt: Sequence[str] | None,
    mesh: Any,
    target: str = "cpu",
    layouts: Layouts | None = None,
    **options: Any,
) -> ShardedValueAndGrad:
    """What ``kinac.value_and_grad(..., mesh=...)`` returns (``layouts=`` from Python: see
    :class:`MeshValueAndGrad`). An unknown option is a usage error naming it (it was Python's
    bare ``TypeError``), as ``kinac.compile(..., mesh=...)``'s."""
    import inspect

    from kinac.api_options import check_options

    own = ("self", "path", "name", "wrt", "mesh", "target", "layouts", "cache_dir", "no_cache")
    cls = MeshValueAndGrad if layouts is not None else ShardedValueAndGrad
    takes = [k for k in inspect.signature(cls.__init__).parameters if k not in own]
    check_options(options, target, "kinac.value_and_grad(..., mesh=...)", takes, gpu=False)
    if layouts is not None:
        if target != "cpu":
            raise KinaUsageError("a sharded gradient runs on the threaded simulator: target='cpu'")
        return MeshValueAndGrad(path, name, wrt, mesh, layouts, **options)
    return ShardedValueAndGrad(path, name, wrt, mesh, target=target, **options)


def mesh_value_and_grad(
    path: str | os.PathLike[str],
    name: str,
    wrt: Sequence[str],
    mesh: Any,
    layouts: Layouts,
    **options: Any,
) -> MeshValueAndGrad:
    """The trainer's hook: ``value_and_grad`` of ``name`` on the simulated ``mesh`` (a
    ``MeshSpec``) with the parameters laid out by ``layouts``; calling it with the global
    arguments returns the global ``(loss, {name: gradient})``."""
    return MeshValueAndGrad(path, name, wrt, mesh, layouts, **options)


class MeshParallel:
    """The trainer's loss-and-gradient step on a simulated mesh, with :class:`DataParallel`'s
    interface (``kinac.train.parallel``): ``MeshParallel(workspace, entry, info, n,
    layout="tp")(args)`` returns the global ``(loss, {weight: gradient})`` of one step, computed
    by the per-device program of the entry's gradient graph (``dp``: the batch split; ``tp``:
    Megatron; ``2d``: both on ``2 x n/2``; :mod:`kinac.shard.grad_layouts`). ``log`` is the last
    step's :class:`kinac.rt.comm.CommLog`, ``mesh`` its ``MeshSpec``."""

    def __init__(
        self, workspace: str, entry: str, info: Any, n: int, layout: str = "dp", **options: Any
    ) -> None:
        from kinac.artifacts.sharded import MeshSpec
        from kinac.shard.grad_layouts import mesh_shape, training_layouts

        got = mesh_shape(layout, n)
        if isinstance(got, str):
            raise KinaUsageError(f"--simulate {n} --layout {layout}: {got}")
        self.mesh = MeshSpec(*got)
        self.layout, self.n, self.info = layout, n, info
        names = [p.name for p in info.weights]
        self.layouts = training_layouts(layout, [(p.name, len(p.shape)) for p in info.params])
        self.vg = mesh_value_and_grad(workspace, entry, names, self.mesh, self.layouts, **options)
        self.dims = {d: info.dims[d] for d in info.dim_params}
        self.log: Any = None

    def __call__(self, args: tuple[Any, ...]) -> tuple[Any, dict[str, Any]]:
        """The global batch's loss and gradients."""
        loss, grads = self.vg(*args, **self.dims)
        self.log = self.vg.last_log
        return loss, grads

    def describe(self) -> str:
        return self.vg.describe()


def sharded_trainer(
    workspace: str,
    entry: str,
    n: int,
    layout: str = "dp",
    bucket_mb: float | None = None,
    **kwargs: Any,
) -> Any:
    """A :class:`kinac.train.Trainer` whose loss-and-gradient step runs on ``n`` simulated
    devices in ``layout`` (``dp``, ``tp`` or ``2d``), gradients bucketed when ``bucket_mb`` is
    given. ``Trainer(simulate=n, layout=...)`` constructs :class:`MeshParallel` for ``tp`` and
    ``2d``; its ``dp`` is its own rank-local data parallelism, this one's the gradient graph's
    program."""
    from kinac.train import Trainer

    if kwargs.get("target", "cpu") != "cpu":
        raise KinaUsageError("sharded training runs on the host's device simulator: target='cpu'")
    trainer = Trainer(workspace, entry, **kwargs)
    options = {k: kwargs[k] for k in ("cache_dir", "no_cache") if k in kwargs}
    trainer.parallel = MeshParallel(
        str(workspace), entry, trainer.info, n, layout, bucket_mb=bucket_mb, **options
    )
    return trainer
