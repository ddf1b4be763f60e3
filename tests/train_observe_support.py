"""A tiny training workspace for the ``kinac train`` observability tests (metrics and the
determinism gate): an embedding table and a head, cross-entropy; compiles in about a second."""

from __future__ import annotations

from pathlib import Path

TOML = """[workspace]
name = "t"
sources = ["*.kina"]

[[entry]]
name = "tiny"
defn = "loss"
dims = { B = 4, S = 8, D = 16, V = 32 }
"""
SRC = """(import "std/loss.kina")
(defn loss [(tokens : (tensor i32 [B S])) (targets : (tensor i32 [B S]))
            (table : (tensor f32 [V D])) (head : (tensor f32 [D V]))] -> f32
  (where (<= (* B S V) 2147483647))
  (let [(h (gather table (reshape tokens [(* B S)])))]
    (cross-entropy (matmul h head) (reshape targets [(* B S)]))))
"""
TOKENS_PER_STEP = 4 * 8


def tiny_workspace(root: Path) -> Path:
    """``root`` as a workspace with one training entry ``tiny``."""
    (root / "kina.toml").write_text(TOML)
    (root / "t.kina").write_text(SRC)
    return root
