"""Internal compiler errors of lowering and code generation, reported through one channel.

Why: a well-typed, specialised program must lower; if xDSL's verifier, llvmlite's parser or
numpy raises on the way, that is a bug in kinac, and the user deserves one report that says
which entry, which stage and which kernel, with the internal message attached, not a
traceback from deep inside a library. The pipeline's lowering and codegen queries run their
stage under :func:`internal_errors`; passes name the kernel they are working on with
:func:`in_kernel`. Light: imports nothing heavy, so any stage may use it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from kinac.errors import EXIT_INTERNAL, KinaCompileError, KinaError

_KERNEL_ATTR = "kinac_kernel"  # set on an exception raised while lowering a kernel


class InternalCompilerError(KinaCompileError):
    """Lowering or code generation failed on a program the checker accepted (a kinac bug)."""

    exit_code = EXIT_INTERNAL

    def __init__(self, entry: str, stage: str, kernel: str | None, cause: BaseException) -> None:
        where = f"entry `{entry}`, stage {stage}" + (f", kernel {kernel}" if kernel else "")
        first = (str(cause).strip().splitlines() or [""])[0][:400]
        super().__init__(
            f"internal compiler error ({where}): {type(cause).__name__}: {first}\n"
            "  this is a bug in kinac, not in your program; please report it"
        )
        self.entry, self.stage, self.kernel, self.cause = entry, stage, kernel, cause


def entry_label(defn: str, dims: tuple[tuple[str, object], ...], file: str = "") -> str:
    """``mlp at B=4, D=256 (mlp.kina)``: which specialisation failed."""
    at = ", ".join(f"{k}={v}" for k, v in dims)
    return defn + (f" at {at}" if at else "") + (f" ({file})" if file else "")


@contextmanager
def in_kernel(name: str) -> Iterator[None]:
    """Name the kernel being lowered, for an internal error raised inside (innermost wins)."""
    try:
        yield
    except Exception as e:
        if getattr(e, _KERNEL_ATTR, None) is None:
            try:
                setattr(e, _KERNEL_ATTR, name)
            except AttributeError:  # an exception type with __slots__: report without it
                pass
        raise


@contextmanager
def internal_errors(entry: str, stage: str) -> Iterator[None]:
    """Run one stage of ``entry``: any exception but a :class:`KinaError` (already a report)
    or an interrupt becomes an :class:`InternalCompilerError` chained to its cause."""
    try:
        yield
    except KinaError:
        raise
    except Exception as e:  # noqa: BLE001 - the one place lowering failures are reported
        raise InternalCompilerError(entry, stage, getattr(e, _KERNEL_ATTR, None), e) from e
