"""An unreadable ``kina.toml`` is named once (routed from the new-user round): the message
said "kina.toml: cannot read kina.toml: cannot read it: ..."."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kinac.cli import main


@pytest.mark.parametrize(
    "make,says",
    [
        (lambda p: p.write_bytes(b'[workspace]\nname = "caf\xe9"\n'), "it is not valid UTF-8"),
        (lambda p: os.mkfifo(p), "it is not a regular file"),
    ],
)
def test_unreadable_kina_toml_is_named_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: object, says: str
) -> None:
    (tmp_path / "a.kina").write_text("(defn f [(x : (tensor f32 [N]))] -> (tensor f32 [N]) x)\n")
    make(tmp_path / "kina.toml")  # type: ignore[operator]
    assert main(["build", str(tmp_path), "--no-cache"]) == 2
    err = capsys.readouterr().err
    (line,) = [x for x in err.splitlines() if x.startswith("kinac: error:")]
    assert line.startswith(f"kinac: error: kina.toml: {says}"), line
    assert line.count("kina.toml") == 1 + ("UTF-8" in says) and "read it" not in line, line
