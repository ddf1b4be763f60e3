"""Generated workspaces for the incremental benchmark and the random-edit fuzz test.

``generate(root, files, defns)`` writes ``files`` modules of ``defns`` defns each. Each module
imports the previous one and some of its defns call the previous module's, so an edit has
real dependents; all of it type-checks.
"""

from __future__ import annotations

from pathlib import Path

BODIES = (
    "(add (matmul x w) x)",
    "(relu (mul (matmul x w) 0.5))",
    "(let [(y (matmul x w)) (z (tanh y))] (sub z x))",
    "(mul (sigmoid x) (matmul x w))",
    "(let [(n (rsqrt (add (mean (square x) :axis -1 :keepdims true) 1e-6)))] (mul x n))",
)


def defn_name(f: int, d: int) -> str:
    return f"m{f:03d}_d{d}"


def defn_text(f: int, d: int, variant: int = 0) -> str:
    body = BODIES[(f + d + variant) % len(BODIES)]
    if f > 0 and d % 3 == 1:
        body = f"(add {body} ({defn_name(f - 1, d)} x w))"
    elif d > 0 and d % 3 == 2:
        body = f"(add {body} ({defn_name(f, d - 1)} x w))"
    return (
        f"(defn {defn_name(f, d)} [(x : (tensor T [..b N])) (w : (tensor T [N N]))]\n"
        f"  -> (tensor T [..b N])\n"
        f"  {body})\n"
    )


def file_text(f: int, defns: int) -> str:
    head = f"; generated module {f}\n(module m{f:03d})\n"
    if f > 0:
        head += f'(import "m{f - 1:03d}.kina")\n'
    return head + "\n".join(defn_text(f, d) for d in range(defns))


def generate(root: Path, files: int = 100, defns: int = 10) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "kina.toml").write_text('[workspace]\nname = "generated"\n')
    for f in range(files):
        (root / f"m{f:03d}.kina").write_text(file_text(f, defns))
