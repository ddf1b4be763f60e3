"""The kina.toml surface of gradients: an entry's ``grad = [...]`` builds the gradient graph
and its code with the entry (``kinac build``), a bad request is K0155 on the entry, and
``kinac.value_and_grad(path, entry)`` differentiates with respect to the entry's list."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from test_grad_models import MLP_LOSS, MLP_W, ROOT, rel_err, torch_mlp

import kinac
from kinac import pipeline
from kinac.errors import KinaUsageError
from kinac.session import Session

TOML = """[workspace]
name = "mlp"

[[entry]]
name = "mlp-train"
defn = "mlp-loss"
dims = { B = 2, S = 4, D = 8, F = 16 }
grad = ["w1", "b1", "w2", "b2"]

[[entry]]
name = "mlp-forward"
defn = "mlp-loss"
dims = { B = 2, S = 4, D = 8, F = 16 }
"""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "mlp"
    shutil.copytree(ROOT / "mlp", w)
    (w / "loss.kina").write_text(MLP_LOSS)
    (w / "kina.toml").write_text(TOML)
    return w


def build(ws: Path) -> pipeline.BuildReport:
    sess = Session(ws, no_cache=True)
    return pipeline.build(sess.db, ())


def test_build_makes_the_gradient_of_an_entry_with_grad(ws: Path) -> None:
    report = build(ws)
    assert not [d for r in report.files for d in r.diagnostics if d.is_error]
    kinds = {(name, kind) for name, kind, _ in report.artifacts}
    assert {("mlp-train", "grad-graph"), ("mlp-train", "grad-object")} <= kinds
    assert not any(k.startswith("grad") for n, k in kinds if n == "mlp-forward")


def test_a_bad_grad_list_is_k0155(ws: Path) -> None:
    (ws / "kina.toml").write_text(TOML.replace('"b2"]', '"b2", "S"]'))
    report = build(ws)
    diags = [d for r in report.files for d in r.diagnostics]
    assert [d.code for d in diags] == ["K0155"]
    assert "entry `mlp-train`" in diags[0].message and "`S`" in diags[0].message


def test_value_and_grad_takes_the_entry_list(ws: Path) -> None:
    import torch

    fn = kinac.value_and_grad(ws, "mlp-train", no_cache=True)
    assert fn.wrt == tuple(MLP_W)
    rng = np.random.default_rng(5)
    shapes = {"x": (2, 4, 8), "w1": (8, 16), "b1": (16,), "w2": (16, 8), "b2": (8,), "y": (2, 4, 8)}
    arrays = {n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()}
    value, grads = fn(*arrays.values())
    t = {n: torch.tensor(a, requires_grad=n in MLP_W) for n, a in arrays.items()}
    ref = torch_mlp(t)
    ref.backward()  # type: ignore[attr-defined]
    for n in MLP_W:
        assert rel_err(grads[n], t[n].grad.numpy()) <= 1e-5  # type: ignore[union-attr]
    with pytest.raises(KinaUsageError, match="needs wrt"):
        kinac.value_and_grad(ws, "mlp-forward", no_cache=True)


def test_gradient_queries_rerun_exactly_on_a_loss_edit(ws: Path) -> None:
    """A comment edit re-runs nothing after reading; a loss body edit re-runs the entry's
    gradient graph and lowering, and compiles only the kernels whose text changed."""
    cache = str(ws.parent / "cache")

    def rebuild() -> set[tuple[str, object]]:
        sess = Session(ws, cache_dir=cache)
        sess.build()
        sess.close()
        return set(sess.db.events.executed_names(None))

    first = rebuild()
    total = len({k for n, k in first if n == "host_kernel_object"})
    assert rebuild() == set()
    loss = ws / "loss.kina"
    loss.write_text(loss.read_text().replace("(module mlp_loss)", "(module mlp_loss) ; a note"))
    ran = {n for n, _ in rebuild()}
    assert not ran & {"grad_graph", "grad_lowered", "grad_object_code", "check_defn"}, ran
    loss.write_text(loss.read_text().replace("(square (sub", "(abs (sub"))
    ran_keys = rebuild()
    ran = {n for n, _ in ran_keys}
    assert {"grad_graph", "grad_lowered", "grad_object_code"} <= ran, ran
    grads = {k[0].defn for n, k in ran_keys if n == "grad_graph"}  # type: ignore[index]
    assert grads == {"mlp-loss"}
    compiled = [k for n, k in ran_keys if n == "host_kernel_object"]
    # 4 of 18 here: the kernels the edit changed; matmuls and the forward's kernels are reused
    assert 0 < len(compiled) <= total // 2, (len(compiled), total)
