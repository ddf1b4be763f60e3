"""``kinac.compile(path, name, mesh=...)`` and ``kinac run --simulate``: a sharded entry run on a
simulated mesh, taking and returning GLOBAL arrays.

Why a wrapper of :class:`kinac.api.CompiledDefn`: a sharded call binds dims and checks its
arguments exactly as a plain call does (the global arrays are the entry's arguments); only
what runs differs. The entry's per-device program (``device_program``, its segments compiled
by the ordinary host path) runs on every rank of a threaded simulator
(:mod:`kinac.rt.comm`): each rank gets its slice of every argument (by the program's
parameter layouts) and the ranks' outputs are assembled into global arrays (partial sums
added). The result equals the unsharded call's (up to the order of floating-point sums).

Which mesh (``mesh=``, or ``--simulate``'s value):

- ``None`` / ``""``: the mesh the entry's sharding annotations name;
- a mesh name: that mesh, which must be the one the annotations name (or, for an entry without
  annotations, any mesh the file sees: the entry then runs replicated on it);
- ``N`` equal to the annotations' mesh's device count: that mesh (a 2x2 mesh for ``N = 4``);
- another ``N``, a shape ``(2, 2)`` or ``"2x2"``: the annotations' mesh resized to that shape (same
  name and axes; a 1-D mesh takes ``N``), re-planned for the new sizes (sizes that do not divide
  an annotated dim are a usage error); an entry without annotations runs replicated on a mesh
  of that shape (every device computes everything; no collective).
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from kinac.api_build import check_devices, check_fixed_dims, check_fixed_shapes
from kinac.api_mesh import (
    BACKENDS,
    DEFAULT_TIMEOUT_S,
    MAX_SIMULATED,
    check_divisible,
    choose_backend,
    parse_mesh,
    shape_text,
)
from kinac.api_sharded_types import ArgTypes
from kinac.errors import KinaCallError, KinaCompileError, KinaUsageError


class ShardedDefn:
    """A defn (or entry) whose calls run on a simulated mesh: global arrays in and out.

    ``last_log`` (a :class:`kinac.rt.comm.CommLog`) and ``last_program`` describe the last
    call: the collectives each rank ran and the bytes they moved, the program it ran."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        name: str,
        mesh: Any,
        target: str = "cpu",
        cache_dir: str | None = None,
        no_cache: bool = False,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        compiled: Any = None,
        backend: str = "auto",
    ) -> None:
        from kinac.api import CompiledDefn

        if backend not in BACKENDS:
            raise KinaUsageError(f"backend={backend!r}: one of {', '.join(BACKENDS)}")
        self.backend = choose_backend(target) if backend == "auto" else backend
        if target == "cuda" and self.backend != "nccl":
            raise KinaUsageError(
                "a sharded entry outside a launch runs on the threaded simulator, on the host: "
                "use target='cpu'; on GPUs it runs one process per GPU through NCCL: launch it "
                "with `kinac launch -n N -- ...` (or torchrun)"
            )
        if self.backend == "nccl" and target != "cuda":
            raise KinaUsageError("backend='nccl' runs on GPUs: use target='cuda'")
        self.target = target
        self.dist: Any = None
        if self.backend in ("tcp", "nccl"):
            from kinac.rt.comm.rendezvous import DistEnv

            self.dist = DistEnv.from_env()
            if self.dist is None:
                raise KinaUsageError(
                    "a distributed run needs the environment of `kinac launch -n N -- ...` "
                    "(or torchrun/SLURM): RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT"
                )
            if mesh is None or mesh == "":
                mesh = self.dist.world_size  # as many devices as ranks
        self.request = parse_mesh(mesh)
        self._asked = self.request  # as given (``_settle`` may turn N into the own mesh)
        if self.backend == "simulator" and isinstance(self.request, tuple):
            total = 1
            for n in self.request:
                total *= n
            if total > MAX_SIMULATED:
                raise KinaUsageError(
                    f"the simulator runs one thread per device: {total} devices "
                    f"({shape_text(self.request)}) is more than {MAX_SIMULATED}"
                )
        self.inner = compiled or CompiledDefn(
            path, name, target=target, cache_dir=cache_dir, no_cache=no_cache
        )
        self.key = self.inner.key
        self.timeout_s = timeout_s
        self.last_log: Any = None
        self.last_program: Any = None
        self._runs: dict[Any, tuple[Any, list[Any]]] = {}
        self._arg_types = ArgTypes()
        self._check_request()

    @classmethod
    def wrap(
        cls,
        compiled: Any,
        mesh: Any,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        backend: str = "simulator",
    ) -> ShardedDefn:
        """A sharded view of an already resolved :class:`CompiledDefn` (``kinac run``)."""
        return cls(
            "", compiled.key.name, mesh, compiled=compiled, timeout_s=timeout_s, backend=backend
        )

    # -- which mesh ---------------------------------------------------------------------------

    def _meshes(self) -> tuple[Any, ...]:
        from kinac.pipeline_support import CheckEnv

        return CheckEnv(self.inner.sess.db).meshes(self.key.file)

    def _own_mesh(self) -> Any:
        """The mesh the signature's annotations name (:func:`kinac.shard.entry.entry_mesh`
        without a graph); a mesh named only by a ``reshard`` or collective in the body is
        known once the entry is specialised (:meth:`_build`, from its plan)."""
        from kinac import pipeline
        from kinac.shard.entry import entry_mesh

        sig = pipeline.signature(self.inner.sess.db, pipeline.DefnKey(self.key.file, self.key.name))
        return entry_mesh(sig, self._meshes()) if sig is not None else None

    def _check_request(self) -> None:
        """Refuse, before anything compiles, a mesh the entry cannot run on (against the
        signature's mesh; a body's is checked by :meth:`_settle` when the entry is planned)."""
        try:
            own = self._own_mesh()
            meshes = {m.name: m for m in self._meshes()}
        finally:
            self.inner.sess.db.close()
        self._settle(own, meshes, deferred=own is None)

    def _settle(self, own: Any, meshes: dict[str, Any], deferred: bool = False) -> None:
        """The request against the entry's own mesh ``own`` (None: the entry names none).
        ``deferred``: the signature names none but the body may (a ``reshard``), so an empty
        request is not refused yet."""
        req = self.request
        if isinstance(req, tuple) and len(req) == 1 and own is not None:
            size = 1
            for n in own.shape:
                size *= n
            if req[0] == size:  # N devices, as many as the entry's (N-D) mesh: that mesh
                self.request = req = None
        defn = f"`{self.key.name}`"
        if isinstance(req, str):
            if req not in meshes:
                from kinac.pipeline_support import did_you_mean

                known = ", ".join(f"`{m}`" for m in meshes) or "none"
                raise KinaUsageError(
                    f"no mesh named `{req}` for {defn}{did_you_mean(req, list(meshes))} "
                    f"(meshes its file sees: {known})"
                )
            if own is not None and own.name != req:
                raise KinaUsageError(
                    f"{defn} is sharded over mesh `{own.name}` ({shape_text(own.shape)}), "
                    f"not `{req}`: its annotations name the mesh it runs on"
                )
        elif req is None and own is None and not deferred:
            raise KinaUsageError(
                f"{defn} has no sharding annotation and no reshard or collective naming a mesh, "
                f"so it names no mesh: give a device count (--simulate 4, mesh=4) to run it "
                f"replicated, or annotate its parameters"
            )
        elif isinstance(req, tuple) and own is not None and len(req) != len(own.shape):
            raise KinaUsageError(
                f"{defn} is sharded over the {len(own.shape)}-D mesh `{own.name}` "
                f"({shape_text(own.shape)}, axes {' '.join(own.axes)}); a mesh of "
                f"{shape_text(req)} has {len(req)} dim{'s' * (len(req) > 1)}: give "
                f"{len(own.shape)} size{'s' * (len(own.shape) > 1)}, e.g. {shape_text(own.shape)}"
            )

    def _settle_plan(self, mesh_name: str | None) -> Any:
        """The request settled against the mesh the entry's plan found (``entry_mesh`` with
        the graph: a ``reshard`` in the body names it too), as ``build --shardings`` plans it."""
        meshes = {m.name: m for m in self._meshes()}
        self.request = self._asked
        self._settle(meshes.get(mesh_name) if mesh_name is not None else None, meshes)
        return self.request

    # -- a call -------------------------------------------------------------------------------

    def _key(self, types: tuple[Any, ...], dim_args: dict[str, int]) -> Any:
        """The global entry's key, with every check of a plain call (kinac.api)."""
        from kinac import pipeline

        inner = self.inner
        check_devices(inner, types)
        check_fixed_shapes(inner, types)
        bound = inner._bind(types, dim_args)
        check_fixed_dims(inner, bound)
        return pipeline.EntryKey(
            self.key.file, self.key.name, bound.dims, bound.dtypes, self.target
        )

    def program(self, *args: Any, **dims: int) -> Any:
        """The ``DeviceProgram`` a call with these arguments runs (built, not run)."""
        return self._prepared(*args, **dims)[0][0]

    def _prepared(self, *args: Any, **dims: int) -> tuple[tuple[Any, list[Any]], list[Any]]:
        arrays, dim_args = self.inner._split(args, dims)
        types = self._arg_types(arrays, self.inner.tensor_params)  # by form (type, shape, ...)
        skey = (types, tuple(sorted(dim_args.items())))
        run = self._runs.get(skey)
        if run is None:
            run = self._build(self._key(types, dim_args))
            self._runs[skey] = run
        return run, arrays

    def __call__(self, *args: Any, **dims: int) -> Any:
        from kinac.rt.comm import CommLog, simulate
        from kinac.rt.comm.execute import run_program
        from kinac.rt.comm.layout import assemble, shard_global
        from kinac.rt.host.arrays import as_host_array, host_output

        (program, segments), arrays = self._prepared(*args, **dims)
        glob = [  # the binding checked the shapes; this reads DLPack producers (torch) too
            as_host_array(a, name, t.dtype, tuple(int(d) for d in a.shape))
            for a, (name, t, _) in zip(arrays, program.params, strict=True)
        ]
        mesh = program.mesh

        def rank(comm: Any) -> list[Any]:
            local = [
                shard_global(a, lay, mesh, comm.global_rank)
                for a, (_, _, lay) in zip(glob, program.params, strict=True)
            ]
            return run_program(program, segments, comm, local)

        if self.dist is not None:
            from kinac.rt.comm.distributed import run_distributed

            result, self.last_log = run_distributed(
                program, segments, glob, self.dist, backend=self.backend
            )
            self.last_program = program
            result = [
                host_output(r, t.dtype)
                for r, (_, t, _) in zip(result, program.outputs, strict=True)
            ]
            return result[0] if len(result) == 1 else tuple(result)
        log = CommLog()
        outs = simulate(mesh, rank, timeout_s=self.timeout_s, log=log)
        self.last_log, self.last_program = log, program
        result = [
            host_output(assemble([o[i] for o in outs], lay, mesh), t.dtype)
            for i, (_, t, lay) in enumerate(program.outputs)
        ]
        return result[0] if len(result) == 1 else tuple(result)

    # -- building the program -----------------------------------------------------------------

    def _build(self, key: Any) -> tuple[Any, list[Any]]:
        from kinac import pipeline, pipeline_shard

        db = self.inner.sess.db
        try:
            spec = pipeline.entry_graph(db, key)
            if spec.graph is None:
                raise KinaCallError(self.inner._render(list(spec.diagnostics)))
            plan = pipeline.shard_propagate(db, key)
            errors = [d for d in plan.diagnostics if d.is_error] if plan is not None else []
            if errors:
                raise KinaCompileError(self.inner._render(errors))
            req = self._settle_plan(plan.mesh)
            if plan.mesh is None:
                program = self._replicated(spec.graph, req)
            elif req is None or isinstance(req, str) or req == tuple(n for _, n in plan.axes):
                program = pipeline_shard.device_program(db, key)
            else:
                program = self._resized(db, key, spec.graph, plan.mesh, req)
            assert program is not None, "a plan with a mesh and no error has a program"
            # GPU segments. run_nccl calls each one's device form (gpu_rank.device_segment):
            # outputs stay on the device between segments and collectives, and only the
            # gathered global outputs are downloaded, once (tests/test_nccl_program.py counts
            # the reads). host_segment's host-array form serves host-staged callers only.
            if self.backend == "nccl":
                from kinac.rt.comm.gpu_rank import host_segment
                from kinac.rt.cuda.entry import load_gpu_entry

                segments = [
                    host_segment(load_gpu_entry(lo, ptx))
                    for lo, ptx in pipeline_shard.gpu_segments(db, program)
                ]
            else:
                segments = pipeline_shard.host_segments(db, program)
        finally:
            db.commit()
            db.close()
        return program, segments

    def _replicated(self, graph: Any, req: Any) -> Any:
        """Every device runs the whole entry (no annotation: nothing is split)."""
        from kinac.artifacts.sharded import DeviceProgram, MeshSpec, ParamLayout, RunSegment

        if isinstance(req, str):
            m = {m.name: m for m in self._meshes()}[req]
            mesh = MeshSpec(m.name, tuple(m.shape), tuple(m.axes))
        else:
            axes = ("devices",) if len(req) == 1 else tuple(f"d{i}" for i in range(len(req)))
            mesh = MeshSpec("devices", tuple(req), axes)
        n = len(graph.params)
        whole = lambda t: ParamLayout(((),) * len(t.shape))  # noqa: E731
        outs = tuple(
            (n + k, graph.nodes[o].type, whole(graph.nodes[o].type))
            for k, o in enumerate(graph.outputs)
        )
        return DeviceProgram(
            mesh,
            tuple((name, t, whole(t)) for name, t in graph.params),
            outs,
            (RunSegment(0, tuple(range(n)), tuple(range(n, n + len(outs)))),),
            (graph,),
        )

    def _resized(self, db: Any, key: Any, graph: Any, name: str, shape: tuple[int, ...]) -> Any:
        """The program for the annotations' mesh resized to ``shape``: re-planned, not cached
        (planning the block takes milliseconds; its segments are cached by value)."""
        from kinac import pipeline
        from kinac.diag.model import Label
        from kinac.shard.device import device_program
        from kinac.shard.entry import plan_entry

        meshes = tuple(replace(m, shape=shape) if m.name == name else m for m in self._meshes())
        sig = pipeline.signature(db, pipeline.DefnKey(key.file, key.defn))
        assert sig is not None, "an entry that specialised has a signature"
        plan = plan_entry(graph, sig, meshes, key.file)
        errors = [d for d in plan.diagnostics if d.is_error]
        if errors:  # said against the resized mesh, which the source does not show
            raise KinaCompileError(
                f"on mesh `{name}` resized to {shape_text(shape)} (the source declares "
                f"{shape_text(next(m.shape for m in self._meshes() if m.name == name))}):\n"
                + self.inner._render(errors)
            )
        check_divisible(graph, plan, f"mesh `{name}` resized to {shape_text(shape)}")

        def span_of(label: Label | None) -> str:
            span = pipeline.resolve_span(db, label.loc) if label is not None else None
            return f"{span.file}:{span.line}:{span.col}" if span is not None else ""

        return device_program(graph, plan, span_of)

    def describe(self) -> str:
        """One line about the last call: the mesh and the collectives each device ran."""
        if self.last_program is None:
            return "not run yet"
        m = self.last_program.mesh
        axes = " x ".join(f"{a}={n}" for a, n in zip(m.axes, m.shape, strict=True))
        if self.dist is not None:
            return (
                f"ran on {self.dist.world_size} process{'es' * (self.dist.world_size != 1)}, "
                f"mesh `{m.name}` ({axes}): "
                f"{self.last_log.summary(per_device_only=True)}"
            )
        return f"simulated on mesh `{m.name}` ({axes}): {self.last_log.summary()}"

    def __repr__(self) -> str:
        req = "its own mesh" if self.request is None else f"mesh {self.request!r}"
        return f"<kinac sharded {self.key.name} from {self.key.file} on {req}>"
