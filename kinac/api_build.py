"""How a compiled defn builds the entry for one set of argument types
(:meth:`kinac.api.CompiledDefn.specialisation`): the checks made before and after binding
(each argument's device; a kina.toml entry's fixed shapes and dims, so the argument that
disagrees is named), then the cached queries and the loader. Each reads the defn's public
attributes only; the differentiated and sharded defns make the same checks."""

from __future__ import annotations

from typing import Any

from kinac.api_resolve import render
from kinac.errors import KinaCallError, KinaCompileError


def check_devices(defn: Any, types: tuple[Any, ...]) -> None:
    """Arrays for unannotated parameters must be where the entry runs (host arrays are
    copied in for a GPU target); annotated ones are checked against their annotation."""
    for name, placed, t in zip(defn.tensor_params, defn.placed, types, strict=True):
        if placed or t.device in (defn.default_device, "cpu"):
            continue
        if defn.target == "cpu":
            raise KinaCallError(
                f"argument `{name}` lives on {t.device} but `{defn.key.name}` is compiled "
                f"for the CPU: pass a host array (.cpu()) or compile with target='cuda'"
            )
        raise KinaCallError(
            f"argument `{name}` lives on {t.device}, but unannotated parameters run on "
            f"{defn.default_device} (kina.toml target.device): move it there, or "
            f"annotate the parameter with @cuda(N)"
        )


def check_fixed_shapes(defn: Any, types: tuple[Any, ...]) -> None:
    """For a kina.toml entry (or ``kinac run --dims``), compare each argument with the
    shape the fixed dims give its parameter before binding dims from the arguments, so the
    argument that disagrees is the one named (:mod:`kinac.call_shapes`)."""
    if defn.fixed is None:
        return
    from kinac import pipeline
    from kinac.call_shapes import fixed_shape_problems

    key = pipeline.EntryKey(
        defn.key.file, defn.key.name, defn.fixed.dims, defn.fixed.dtypes, defn.target
    )
    spec = pipeline.entry_graph(defn.sess.db, key)
    if spec.graph is None:
        return  # the entry does not build: reported with its own diagnostics below
    tensors = [p for p in defn.signature.params if not p.is_dim]
    problems = fixed_shape_problems(
        tensors, spec.graph.params, types, defn.fixed_by, defn.fixed_what
    )
    if problems:
        fixed_dims = ", ".join(f"{k} = {v}" for k, v in defn.fixed.dims)
        raise KinaCallError(
            "\n".join(problems) + f"\n  ({defn.fixed_by} is built for {fixed_dims})"
        )


def check_fixed_dims(defn: Any, bound: Any) -> None:
    """For a kina.toml entry (or ``kinac run --dims``): the dims the arguments bound must be
    the ones the entry fixes."""
    if defn.fixed is not None:
        want = dict(defn.fixed.dims)
        got = dict(bound.dims)
        bad = {k: (v, got.get(k)) for k, v in want.items() if got.get(k) != v}
        if bad:
            detail = ", ".join(
                f"{k} = {g} but {defn.fixed_what} fixes {k} = {w}" for k, (w, g) in bad.items()
            )
            raise KinaCallError(f"{defn.fixed_by} is built for fixed dims: {detail}")


def build_entry(defn: Any, bound: Any) -> Any:
    """The loaded entry of ``defn`` for the bound dims and dtypes: built through the cached
    queries (whatever was built is kept, even when a later step fails), then loaded for the
    defn's target."""
    from kinac import pipeline

    key = pipeline.EntryKey(defn.key.file, defn.key.name, bound.dims, bound.dtypes, defn.target)
    db = defn.sess.db
    code: Any
    artifact: Any  # PTX text for cuda, object code bytes for the host
    try:
        spec = pipeline.entry_graph(db, key)
        if spec.graph is None:
            raise KinaCallError(render(defn.sess, list(spec.diagnostics)))
        if defn.target == "cuda":
            try:
                code, artifact = pipeline.gpu_lowered(db, key), pipeline.ptx(db, key)
            except NotImplementedError as e:
                raise KinaCompileError(
                    f"the CUDA back end cannot compile this entry: {e}"
                ) from None
        else:
            code, artifact = pipeline.lowered(db, key), pipeline.object_code(db, key)
    finally:
        db.commit()  # whatever was built is kept, even when a later step fails
        db.close()  # and the cache's files are not held until the next shape
    assert code is not None and artifact is not None
    if defn.target == "cuda":
        from kinac.rt.cuda.entry import load_gpu_entry

        return load_gpu_entry(code, artifact, **defn.gpu_options)
    from kinac.rt.host import load_entry

    return load_entry(code, artifact)
