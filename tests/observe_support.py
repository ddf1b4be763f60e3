"""The workspace the observability tests (profile, determinism, metrics) run: a two-layer MLP
entry, so each test states only the sizes it needs."""

from __future__ import annotations

from pathlib import Path

MLP_SRC = """(defn mlp [(x : (tensor f32 [B D])) (w1 : (tensor f32 [D F])) (w2 : (tensor f32 [F D]))]
  -> (tensor f32 [B D])
  (matmul (gelu (matmul x w1)) w2))
"""


def mlp_workspace(root: Path, *, b: int, d: int, f: int) -> Path:
    """``root`` as a workspace with one entry ``mlp`` at dims B, D, F."""
    (root / "m.kina").write_text(MLP_SRC)
    (root / "kina.toml").write_text(
        f"""[workspace]
name = "p"
[[entry]]
name = "mlp"
defn = "mlp"
dims = {{ B = {b}, D = {d}, F = {f} }}
"""
    )
    return root
