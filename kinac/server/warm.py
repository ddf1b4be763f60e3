"""The resident server's start-up work: imports and cold builds paid before the socket is bound.

Why its own module: :mod:`kinac.server.serve` serves requests; what it does once, before the
first one (import the lowering, LLVM and PTX modules, build a tiny program for the CPU and for
PTX, build the served workspace once without the cache), is a separate concern with its own
tuning (``PREWARM``, the warm program). A request's CPU is unchanged by it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# imported at start so an edit's build does not pay for them (the cold build's lazy imports)
PREWARM = (
    "kinac.pipeline",
    "kinac.check.solver",
    "kinac.shard.propagate",
    "kinac.ir.host.pipeline",
    "kinac.ir.host.kernels",
    "kinac.ir.host.stitch",
    "kinac.ir.gpu.pipeline",
    "kinac.ir.gpu.stitch",
    "kinac.codegen.llvm",
    "kinac.codegen.ptx",
    "kinac.cli",
)


WARM_SOURCE = """(module warm)
(import "std/nn.kina")

(defn warm [(x : (tensor f32 [B S D])) (w : (tensor f32 [D]))
            (wg : (tensor f32 [D F])) (wu : (tensor f32 [D F])) (wd : (tensor f32 [F D]))]
  -> (tensor f32 [B S D])
  (add x (swiglu (rms-norm x w) wg wu wd)))
"""
WARM_TOML = """[workspace]
name = "warm"

[[entry]]
name = "warm"
defn = "warm"
dims = { B = 2, S = 8, D = 16, F = 32 }
"""


def prewarm() -> None:
    """Import what a build may need, then build a tiny program (norm, matmuls, SwiGLU) for the
    CPU and for PTX without a cache: what only the first lowering of a process pays (xDSL's
    operation formats parsed on first use, LLVM's targets, the checker's solver) is paid here,
    not by the first edit a client sends. Failures are the real builds' to report."""
    import importlib
    import tempfile

    for name in PREWARM:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S112 - e.g. an optional GPU dependency missing
            continue
    from kinac.session import Session

    with tempfile.TemporaryDirectory(prefix="kinac-warm-") as tmp:
        Path(tmp, "warm.kina").write_text(WARM_SOURCE)
        Path(tmp, "kina.toml").write_text(WARM_TOML)
        for target in ("cpu", "cuda"):
            try:
                Session(tmp, no_cache=True, target=target).build()
            except Exception:  # noqa: BLE001, S112
                continue


def warm_workspace(sess: Any) -> bool:
    """Build the served workspace once in this process without the cache (nothing read from it
    or written to it): what a build fills per process and not in the cache, the canonical
    kernels printed once per structure, the checker's per-process state, is then as warm as
    in a session that built cold (``kinac watch``, ``--resident``), and the first edits a client
    sends do not pay for it (a served L=32 edit fused its changed piece in 27 ms instead of
    12 until every layer had been edited once). Start-up work, like :func:`prewarm`: one cold
    build's CPU, once, before the socket is bound; a request's CPU is unchanged. False when
    it failed (the real builds report why)."""
    from kinac.session import Session

    ws = sess.ws
    path = ws.root / ws.single_file if ws.single_file else ws.root
    try:
        warm = Session(path, no_cache=True, target=sess.target_override)
        ok = warm.build().error_count == 0
    except Exception:  # noqa: BLE001
        return False
    # Its values, by fingerprint, are the ones the served session would load from the cache
    # (the checked signatures, the specialised calls, the pieces, kernels and objects an edit
    # reads and did not change): taken as they are, nothing read or decoded (~7 ms of a
    # served L=32 edit), and the edit's new values share their unchanged parts with them.
    sess.db.adopt_values(warm.db)
    return ok
