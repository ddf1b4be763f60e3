"""The Python API: ``kinac.compile(path, name)`` returns a callable compiled defn.

The callable takes numpy arrays or any DLPack producer (torch tensors) and returns arrays that
are DLPack producers (``torch.from_dlpack`` on them copies nothing). Dims are bound from the
arguments' shapes at each call: one specialisation per distinct set of dims, compiled through the
same cached queries as ``kinac build`` (so a second process, or a second call, reuses it). A wrong
rank, shape, dtype or device is reported before anything runs, naming the parameter and the dim
equation it breaks.
"""

from __future__ import annotations

import os
import weakref
from typing import Any

from kinac.api_build import build_entry, check_devices, check_fixed_dims, check_fixed_shapes
from kinac.api_hot import ITEMS, VERSION, fast_key, form_moved, read_state, state_reader
from kinac.api_resolve import locate, render
from kinac.api_split import split_call
from kinac.api_types import arg_type, brief, check_byte_order, python_help
from kinac.errors import (
    KinaCallError,
    KinaCompileError,
    KinaError,
    KinaUsageError,
)
from kinac.rt import hot as hot_mod
from kinac.rt.hot import MISS  # a bound call's "not run: an array it checks changed form"

FAST_CACHE = 256  # distinct argument forms remembered per compiled defn


class NotPicklableError(KinaUsageError, TypeError):
    """``pickle.dumps`` (or ``copy.copy``) of a compiled defn: it holds loaded machine code, so
    it cannot cross processes; the other process compiles it again (from the disk cache).
    A ``TypeError``, as pickling a ``threading.Lock`` raises, and a :class:`KinaUsageError`."""


class CompiledDefn:
    """A defn of a workspace, compiled per distinct argument shapes on first call."""

    # how a defn that is no kina.toml entry is run, as "no entry or defn named X" lists them:
    # a Python caller passes arrays; ``kinac run`` (which builds one of these) says --dims
    RUN_DEFN_HINT = "call one with its arrays"

    def __init__(
        self,
        path: str | os.PathLike[str],
        name: str,
        target: str = "cpu",
        cache_dir: str | None = None,
        no_cache: bool = False,
        **gpu_options: Any,
    ) -> None:
        from kinac.session import Session

        if target not in ("cpu", "cuda"):
            raise KinaUsageError(f"unknown target {target!r}: use 'cpu' or 'cuda'")
        from kinac.api_options import check_options

        check_options(gpu_options, target)
        self.target = target
        self.source = os.fspath(path)  # (what NotPicklableError says to compile again)
        self.gpu_options = gpu_options  # target cuda: graphs=True, allow_tf32=False, max_graphs=8
        self.sess = Session(path, cache_dir=cache_dir, no_cache=no_cache)
        try:
            self._resolve(path, name, target)
        finally:
            self.sess.db.close()  # not held between compilations (each new shape reopens it)

    def _resolve(self, path: str | os.PathLike[str], name: str, target: str) -> None:
        """Find the defn (or entry) and check its file: what every later call needs."""
        from kinac import pipeline

        db = self.sess.db
        entry, self.key = locate(self.sess, path, name, self.RUN_DEFN_HINT)
        self.fixed = entry
        self.fixed_by = f"entry `{name}`"  # what fixed the dims, as messages name it
        self.fixed_what = "the entry"
        report = pipeline.file_report(db, self.key.file)
        self.sess.db.commit()
        errs = [d for d in report.diagnostics if d.is_error]
        if errs:
            raise KinaCompileError(self._render(errs))
        sig = pipeline.signature(db, self.key)
        assert sig is not None
        self.signature = sig
        self.dim_params = [p.name for p in sig.params if p.is_dim]
        self.tensor_params = [p.name for p in sig.params if not p.is_dim]
        # Parameters without @cpu/@cuda(N) run on the target's default device.
        self.placed = [
            p.type is not None and any(a.name in ("cpu", "cuda") for a in p.type.annotations)
            for p in sig.params
            if not p.is_dim
        ]
        self.default_device = "cpu" if target == "cpu" else f"cuda:{pipeline.target(db, ()).device}"
        self._entries: dict[Any, Any] = {}
        # per-call fast path: the form of each argument -> (loaded entry, array positions)
        self._fast: dict[tuple[Any, ...], tuple[Any, tuple[int, ...] | None]] = {}
        self._fast_only = 0  # fast calls that were not hot (fast_calls counts both)
        self.hot_calls = 0  # calls that took the hot path (the same objects again)
        # the hot path's memo (see _remember), in a box the weak references' callbacks empty
        self._memo: list[Any] = [None]
        self._memo_next: tuple[int, ...] | None = None
        self.slow_calls = 0  # calls that bound types from the arguments (first of each form)

    @property
    def fast_calls(self) -> int:
        """Calls that took the fast path, the hot ones included (tests observe these
        counters; the hot path counts one of them only)."""
        return self._fast_only + self.hot_calls

    def _render(self, diags: list[Any]) -> str:
        """Diagnostics as this defn's errors show them (:func:`kinac.api_resolve.render`)."""
        return render(self.sess, diags)

    def _split(
        self, args: tuple[Any, ...], dims: dict[str, int]
    ) -> tuple[list[Any], dict[str, int]]:
        """The call's arrays (in parameter order) and its dims (positional and keyword)."""
        arrays, dim_args, _ = self._split_indexed(args, dims)
        return arrays, dim_args

    def _split_indexed(
        self, args: tuple[Any, ...], dims: dict[str, int]
    ) -> tuple[list[Any], dict[str, int], tuple[int, ...]]:
        """:meth:`_split`, and the positions in ``args`` of the arrays
        (:func:`kinac.api_split.split_call`)."""
        return split_call(self.key.name, self.signature.params, args, dims)

    def __call__(self, *args: Any, **dims: int) -> Any:
        # Hot path: the very arguments of a recent call again (the same array objects, alive,
        # the same dim values): one id tuple compared, then the entry (see :meth:`_remember`).
        memo = self._memo[0]
        if (
            memo is not None
            and tuple(map(id, args)) == memo[0]
            and (dims == memo[1] if dims or memo[1] else True)
            and (not dims or tuple(map(type, dims.values())) == memo[2])
        ):
            where = memo[4]
            arrays = args if where is None else args[where]
            if memo[9]:  # launch first: the bound call compares addresses after its launch,
                try:  # and the torch versions are compared here after it
                    out = memo[3](arrays)
                except KinaError:  # (see below)
                    if not form_moved(memo, args, dims):
                        raise
                    out = MISS
                if out is not MISS:
                    now = tuple(map(VERSION, arrays))
                    if now == memo[7] or self._kept_forms(memo, arrays, now):
                        self.hot_calls += 1
                        return out
                # an array changed form in place: that launch's output is nobody's (the
                # entry's kept block); the fast or full path answers, after it on the stream
                del out
                self._memo[0] = None
            elif (
                tuple(map(VERSION, arrays))
                if (state := memo[6]) is None
                else tuple(map(VERSION, state(arrays)))
                if type(state) is ITEMS
                else state(arrays)
            ) == memo[7]:
                try:
                    out = memo[3](arrays) if memo[8] else memo[3](*arrays)
                except KinaError:
                    # a torch tensor's ``.data`` swapped for another shape moves no version: the
                    # entry's own check refused it (a KinaRuntimeError); the fast or full path
                    # takes it like any new form (a KinaCallError naming it, or a new shape)
                    if not form_moved(memo, args, dims):
                        raise
                    out = MISS
                if out is not MISS:
                    self.hot_calls += 1
                    return out
                self._memo[0] = None  # an array the entry checks changed form: the full path
        # Fast path: every argument seen before in this form (an array's type, dtype, shape and
        # device; a dim's type and value): the specialisation, and which arguments are its
        # arrays, are known without building Kina types (a few attribute reads per array; the
        # full path below costs ~10 us per torch tensor). Dims positional or by keyword take it
        # too. Anything new, or wrong, goes down the full path, which checks and reports it.
        fkey: tuple[Any, ...] | None
        try:
            fkey = fast_key(args, dims)
            hit = self._fast.get(fkey)
        except (AttributeError, TypeError):  # no .dtype/.device, or unhashable parts
            fkey, hit = None, None
        if hit is not None:
            self._fast_only += 1
            entry, where = hit
            self._remember(args, dims, entry, where, fkey)
            if where is None:
                return entry(*args)
            return entry(*[args[i] for i in where])
        entry, arrays, where = self.specialisation(args, dims)
        if fkey is not None and len(self._fast) < FAST_CACHE:
            self._fast[fkey] = (entry, None if len(where) == len(args) else where)
        return entry(*arrays)

    def synchronize(self) -> None:
        """Wait until every call made so far has finished on the GPU (outputs ready for the
        host). Cheaper than ``torch.cuda.synchronize()``, which waits for the whole device:
        it waits for the stream kinac's calls run on (:meth:`kinac.rt.cuda.entry.GpuEntry.
        synchronize`). A no-op for the CPU target, whose calls return finished."""
        for e in self._entries.values():
            sync = getattr(e, "synchronize", None)
            if sync is not None:
                sync()

    def _remember(
        self,
        args: tuple[Any, ...],
        dims: dict[str, Any],
        entry: Any,
        where: Any,
        fkey: tuple[Any, ...] | None = None,
    ) -> None:
        """Make these arguments the hot path's, on the second fast call in a row with the same
        argument objects (so a caller passing a fresh array each time never pays for weak
        references it cannot use).

        Identity stands for the form only while the objects live: each array is weakly
        referenced and its death drops the memo before its id can name another object; int
        arguments are held (ints are immutable, and held ones keep their ids). Arguments that
        are neither weakly referenceable nor ints (or dims that are not exact ints) are never
        memoised. A living object can still change in place: a torch tensor's ``_version``
        counts every in-place change (``t_``, ``resize_``, ``set_``; data writes too, which
        then take the fast path), a numpy array's shape and dtype are compared; the GPU entry
        also checks each tensor's address (:meth:`kinac.rt.cuda.entry.GpuEntry._hot_call`)."""
        ids = tuple(map(id, args))
        box = self._memo
        memo = box[0]
        if memo is not None and memo[0] == ids and memo[1] == dims:
            # the same objects, changed in place (a torch tensor refilled with copy_): the
            # fast path just found their form the memo's, so only their state is renewed
            # (rebuilding would cost weak references on every call of that pattern)
            if tuple(map(type, dims.values())) == memo[2]:
                arrays = args if memo[4] is None else args[memo[4]]
                box[0] = (*memo[:7], read_state(memo[6], arrays), *memo[8:])
            return
        if ids != self._memo_next:
            self._memo_next = ids  # seen once: memoise if the next call repeats it
            return
        if any(type(v) is not int for v in dims.values()):
            return

        def gone(_: Any) -> None:
            box[0] = None

        held: list[Any] = []
        try:
            for a in args:
                held.append(a if type(a) is int else weakref.ref(a, gone))
        except TypeError:  # not weakly referenceable
            return
        span = None
        arrays = args
        if where is not None:
            lo, hi = where[0], where[-1] + 1
            if list(where) != list(range(lo, hi)):
                return  # arrays and dims interleaved: the fast path's list does
            span = slice(lo, hi)
            arrays = args[span]
        # what an array may change in place while staying the same object: torch counts every
        # in-place change (t_, resize_, set_, and data writes too: then the fast path serves);
        # a numpy array's shape and dtype are assignable. Each array by its own kind, so a call
        # mixing numpy and torch arrays reads one counter per tensor, not its shape and dtype
        # (~0.5 us per tensor on the H200's host)
        # a GPU entry's pre-bound launch, valid while its own memo is of these arrays; it
        # checks the form of some arrays itself (host arrays it stages): not read here
        hot = getattr(entry, "hot_path", None)
        call = (hot(tuple(arrays)) if hot is not None else None) or entry
        state: Any = state_reader(arrays, getattr(call, "vouched", ()) if hot_mod.LEAN else ())
        if getattr(state, "__name__", "") == "versions":  # all torch tensors: read inline
            state = None
        try:
            now = read_state(state, arrays)
        except AttributeError:
            return
        run = getattr(call, "run", None) if hot_mod.LEAN else None  # (the arrays as one tuple)
        # launch first (kinac.rt.hot.LAUNCH_FIRST): a bound GPU call that compares addresses
        # after its launch, all arrays torch tensors (their versions compared after it too)
        first = run is not None and state is None and getattr(call, "launch_first", False)
        box[0] = (
            ids, dict(dims), tuple(map(type, dims.values())), run or call, span, held, state, now,
            run is not None, first, getattr(call, "ins", None) if first else None, fkey,
        )  # fmt: skip

    def _kept_forms(self, memo: tuple[Any, ...], arrays: Any, now: tuple[int, ...]) -> bool:
        """After a launched-first hot call whose arrays' versions moved: whether each array
        that moved kept its import's shape, strides and dtype (a data write, ``copy_``: the
        launch read the right thing, and the memo takes the new versions), or not (``t_``:
        the caller redoes the call on the general path)."""
        from kinac.rt.cuda.entry_imports import changed_forms_same

        if not changed_forms_same(arrays, memo[10], memo[7], now):
            return False
        self._memo[0] = (*memo[:7], now, *memo[8:])
        return True

    def specialisation(
        self, args: tuple[Any, ...], dims: dict[str, int]
    ) -> tuple[Any, list[Any], tuple[int, ...]]:
        """The slow path of a call: the loaded entry for these arguments (compiled on first
        use, every check made), the arrays it takes, and their positions in ``args``.

        Reusable by wrappers of a compiled defn (sharded, differentiated calls): the binding
        and every diagnostic of a plain call, without running anything."""
        self.slow_calls += 1
        arrays, dim_args, where = self._split_indexed(args, dims)
        types = tuple(arg_type(a, n) for a, n in zip(arrays, self.tensor_params, strict=True))
        for a, n in zip(arrays, self.tensor_params, strict=True):
            check_byte_order(a, n)
        skey = (types, tuple(sorted(dim_args.items())))
        entry = self._entries.get(skey)
        if entry is None:
            entry = self._specialise(types, dim_args)
            self._entries[skey] = entry
        return entry, arrays, where

    def _bind(self, types: tuple[Any, ...], dim_args: dict[str, int]) -> Any:
        """The dims and dtype variables the argument types fix (``kinac run --inputs`` binds
        through here too). Arguments that disagree are a :class:`KinaCallError` naming the ones
        that disagree with the majority, else the binder's own diagnostics."""
        from kinac.check import bind_call_types

        bound = bind_call_types(self.key.file, self.signature, types, dim_args)
        if isinstance(bound, tuple):
            from kinac.call_shapes import majority_blame

            tensors = [p for p in self.signature.params if not p.is_dim]
            raise KinaCallError(
                majority_blame(tensors, types, dim_args)
                or self._render([python_help(d) for d in bound])
            )
        return bound

    def _specialise(self, types: tuple[Any, ...], dim_args: dict[str, int]) -> Any:
        check_devices(self, types)
        check_fixed_shapes(self, types)
        bound = self._bind(types, dim_args)
        check_fixed_dims(self, bound)
        return build_entry(self, bound)

    def __repr__(self) -> str:
        return f"<kinac compiled {self.key.name} from {self.key.file} for {self.target}>"

    def __reduce__(self) -> Any:
        """Refused (pickle, copy, multiprocessing): loaded machine code, device memory and a
        cache connection cannot be serialised; the default attempt failed deep inside with
        "Can't pickle <function config_text ...>"."""
        name = getattr(getattr(self, "key", None), "name", "?")
        raise NotPicklableError(
            f"a compiled function (`{name}`, kinac.compile) cannot be pickled or copied: it "
            "holds loaded machine code. In the other process (a multiprocessing worker), "
            f"compile it again: kinac.compile({getattr(self, 'source', '...')!r}, {name!r}, "
            f"target={self.target!r}); the disk cache makes that cheap (nothing is rebuilt), "
            "and pass the arrays, not the function"
        )


class CliDefn(CompiledDefn):
    """What ``kinac run`` and ``kinac profile`` build: a compiled defn whose messages name
    the command line's flags rather than a Python call."""

    RUN_DEFN_HINT = "run one with --dims"


def compile(
    path: str | os.PathLike[str], name: str, target: str = "cpu", mesh: Any = None, **options: Any
) -> Any:  # noqa: A001
    """Compile defn (or kina.toml entry) ``name`` of the workspace or file at ``path``.

    With ``mesh=`` (a mesh name, a device count or a shape), calls run the entry's sharded
    program on a simulated mesh and return global arrays (:mod:`kinac.api_sharded`)."""
    if not isinstance(name, str) or not name:
        raise KinaUsageError(
            "kinac.compile(path, name): name is the name of a defn or kina.toml entry (a "
            f"non-empty str), got {brief(name)}"
        )
    if not isinstance(path, (str, os.PathLike)):
        raise KinaUsageError(
            "kinac.compile(path, name): path is a workspace directory or .kina file (a str or "
            f"path), got {brief(path)}"
        )
    if mesh is not None:
        import inspect

        from kinac.api_options import check_options
        from kinac.api_sharded import ShardedDefn

        own = ("self", "path", "name", "mesh", "target", "cache_dir", "no_cache")
        takes = [k for k in inspect.signature(ShardedDefn.__init__).parameters if k not in own]
        check_options(options, target, "kinac.compile(..., mesh=...)", takes, gpu=False)
        return ShardedDefn(path, name, mesh, target=target, **options)
    return CompiledDefn(path, name, target=target, **options)
