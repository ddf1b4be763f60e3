"""Non-ASCII names (defns, parameters, lets, dims) work end to end: the reader accepts them,
the checker resolves them, and lowering keeps them out of xDSL's ASCII-only name hints (a
parameter named `日本` crashed the build with xDSL's ValueError)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from cli_support import kinac_process

from kinac.reader.parse import parse_file

SRC = """(defn größe [(日本 : (tensor T [Ñ])) (ÿ : (tensor T [Ñ]))] -> (tensor T [Ñ])
  (let [(ž (neg 日本)) (π (mul ž Ñ))] (add π ÿ)))
"""
TOML = """[workspace]
name = "u"
[target]
kind = "cpu"
[[entry]]
name = "e"
defn = "größe"
dims = { "Ñ" = 4 }
dtypes = { T = "f32" }
"""


def test_the_reader_keeps_non_ascii_names() -> None:
    pf = parse_file("m.kina", SRC)
    assert pf.diagnostics == ()
    (d,) = pf.defns
    assert d.name == "größe" and [p.name for p in d.signature.params] == ["日本", "ÿ"]


def test_non_ascii_names_build_and_run(tmp_path: Path) -> None:
    (tmp_path / "m.kina").write_text(SRC, encoding="utf-8")
    (tmp_path / "kina.toml").write_text(TOML, encoding="utf-8")
    p = kinac_process("run", str(tmp_path), "e", "--repeat", "1")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "日本" in p.stdout and "Traceback" not in p.stderr

    import kinac

    f = kinac.compile(str(tmp_path / "m.kina"), "größe")
    x = np.arange(4, dtype=np.float32)
    got = f(x, np.ones(4, dtype=np.float32))
    assert np.array_equal(np.asarray(got), -x * 4 + 1)
