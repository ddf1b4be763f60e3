"""``@sharded`` splits that no dims can make even are K0413 at ``kinac check`` (issue: a
``[3]`` split over 2 devices passed the check and was first caught as K0802 when called).

Goldens under ``tests/golden/check_shard``; counterexamples judged against the signature;
concrete dims and unconstrained symbolic dims decided without the solver; valid sharded
programs (the Megatron-annotated transformer block) still check clean."""

from __future__ import annotations

from pathlib import Path

import pytest
from check_golden import golden_compare, run_case
from check_support import Workspace
from test_shard_propagate import MEGATRON, annotated_block

from kinac.check import DefnRef, shard_even
from kinac.check.formula import holds
from kinac.cli import main
from kinac.diag.model import NodeRef

GOLDEN = Path(__file__).resolve().parent / "golden" / "check_shard"
CASES = sorted(GOLDEN.glob("*.kina"))


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_golden(path: Path) -> None:
    out, diags, ws = run_case(path)
    errors = [d for d in diags if d.is_error and d.code != "K0209"]
    if path.stem.startswith("bad"):
        assert errors and all(d.code == "K0413" for d in errors), out
    else:
        assert diags == [], out
    golden_compare(path, out)


@pytest.mark.parametrize(
    ("case", "solved"), [("bad_concrete", set()), ("bad_written", set()), ("good", {"bounded"})]
)
def test_no_solver_when_normal_forms_decide(case: str, solved: set[str]) -> None:
    """Concrete dims, splits written in a body, and symbolic dims nothing else constrains
    never reach Z3."""
    ws = Workspace({f"{case}.kina": (GOLDEN / f"{case}.kina").read_text()}, solve_cache={})
    pf = ws.env.file(f"{case}.kina")
    assert pf is not None
    for d in pf.defns:
        before = ws.env.solver_calls
        ws.env.checked(DefnRef(f"{case}.kina", d.name))
        assert (ws.env.solver_calls > before) == (d.name in solved), d.name


def test_counterexamples_satisfy_the_signature_and_break_the_split() -> None:
    _out, diags, ws = run_case(GOLDEN / "bad_symbolic.kina")
    seen = set()
    for d in diags:
        if d.code != "K0413":
            continue
        assert isinstance(d.primary.loc, NodeRef) and d.counterexample
        name = d.primary.loc.defn
        sig = ws.env.checked(DefnRef("bad_symbolic.kina", name)).sig
        env = dict(d.counterexample)
        assert all(holds(r, env) for _nid, r in sig.where), (name, env)
        assert not all(holds(r, env) for _i, r, _w in sig.shard_divs), (name, env)
        seen.add(name)
    assert seen == {"odd", "fixed", "small", "tied", "sqplus"}


def test_cli_check_reports_the_adversary_program(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "uneven.kina"
    f.write_text(
        "(mesh m [2])\n(defn f [(x : (tensor f32 [3] @sharded(axis=0, mesh=m)))] "
        "-> (tensor f32 [3]) x)\n"
    )
    assert main(["check", str(f), "--no-cache", "--color", "never"]) != 0
    out = capsys.readouterr()
    text = out.out + out.err
    assert "K0413" in text and "2 does not divide 3" in text, text


@pytest.mark.parametrize("mesh", ["(mesh tp [2])", "(mesh tp [4])"])
def test_megatron_block_still_checks_clean(
    tmp_path: Path, mesh: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Clean, and every split settled without Z3 (normal forms or a witness)."""

    def no_solver(*_a: object) -> bool:
        raise AssertionError("the split check asked the solver")

    monkeypatch.setattr(shard_even, "_contradicts", no_solver)
    ws = annotated_block(tmp_path, {**MEGATRON, "x": "@sharded(axis=0, mesh=tp)"}, mesh)
    rc = main(["check", str(ws), "--no-cache", "--color", "never"])
    out = capsys.readouterr()
    assert rc == 0, out.out + out.err
