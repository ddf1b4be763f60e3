"""Literals too large for their dtype, driven through ``kinac check``, ``build`` and ``run``:
a K0604/K0605 diagnostic and exit 1, never a traceback from xDSL or numpy."""

from __future__ import annotations

import subprocess
from pathlib import Path

from cli_support import kinac_process

TOML = """[workspace]
name = "lits"

[target]
kind = "cpu"

[[entry]]
name = "{name}"
defn = "{name}"
dims = {{ N = 4 }}
dtypes = {dtypes}
"""


def _kinac(*args: str) -> subprocess.CompletedProcess[str]:
    p = kinac_process(*args)
    assert "Traceback" not in p.stderr + p.stdout, p.stderr
    return p


def _ws(tmp_path: Path, src: str, name: str, dtypes: str = "{}") -> Path:
    (tmp_path / "kina.toml").write_text(TOML.format(name=name, dtypes=dtypes))
    (tmp_path / "m.kina").write_text(src)
    return tmp_path


def test_check_reports_literals_that_do_not_fit(tmp_path: Path) -> None:
    f = tmp_path / "lits.kina"
    f.write_text(
        "(defn a [(x : (tensor i32 [N]))] -> (tensor bool [N]) (lt x 3000000000))\n"
        "(defn b [(x : (tensor i32 [N]))] -> (tensor i32 [N]) (full i32 [N] 3000000000))\n"
        "(defn c [(x : (tensor i32 [N]))] -> (tensor i32 [N]) (add x N))\n"
    )
    p = _kinac("check", str(f), "--cache-dir", str(tmp_path / "c"))
    out = p.stdout + p.stderr
    assert p.returncode == 1
    assert out.count("K0604") == 2 and "K0605" in out and "N = 2147483648" in out


def test_build_and_run_refuse_a_literal_that_met_a_dtype_variable(tmp_path: Path) -> None:
    ws = _ws(
        tmp_path,
        "(defn o [(x : (tensor T [N]))] -> (tensor T [N]) (mul x 1e39))\n",
        "o",
        '{ T = "f32" }',
    )
    for cmd in (("build", str(ws)), ("run", str(ws), "o")):
        p = _kinac(*cmd)
        assert p.returncode == 1, (cmd, p.stdout, p.stderr)
        assert "K0604" in p.stdout + p.stderr


def test_build_refuses_a_folded_literal_that_does_not_fit(tmp_path: Path) -> None:
    ws = _ws(
        tmp_path,
        "(defn f [(x : (tensor i32 [N]))] -> (tensor i32 [N]) (add x (mul 65536 65536)))\n",
        "f",
    )
    p = _kinac("build", str(ws))
    assert p.returncode == 1 and "K0604" in p.stdout + p.stderr
