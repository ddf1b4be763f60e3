"""Call errors of the Python API that the new-user round found (routed): each is a
:class:`KinaCallError` (or usage error) that says what to do at a Python call, never an
internal exception, a CLI flag or a Kina ``(cast ...)``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kinac
from kinac.errors import KinaCallError, KinaUsageError

SOURCE = "(defn twice [(x : (tensor f32 [N]))] -> (tensor f32 [N]) (add x x))\n"


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("api") / "ws"
    root.mkdir()
    (root / "kina.toml").write_text('[workspace]\nname = "tiny"\n')
    (root / "twice.kina").write_text(SOURCE)
    return root


@pytest.fixture(scope="module")
def twice(ws: Path) -> kinac.api.CompiledDefn:
    return kinac.compile(ws, "twice")


def test_array_passed_by_keyword_is_named_as_an_array_parameter(twice: object) -> None:
    x = np.arange(1000, dtype=np.float32)
    with pytest.raises(KinaCallError) as e:
        twice(x=x)  # type: ignore[operator]
    msg = str(e.value)
    assert "`x` is an array parameter" in msg and "positionally" in msg, msg
    assert "positive int" not in msg and "999" not in msg, msg  # the array is not dumped
    # a keyword naming no dim parameter was ignored: N=5 beside a [1000] array ran
    for kw in ({"N": 5}, {"Q": 3}):
        with pytest.raises(KinaCallError, match="has no dim parameter"):
            twice(x, **kw)  # type: ignore[operator]


def test_meta_tensor_is_a_call_error(twice: object) -> None:
    torch = pytest.importorskip("torch")
    with pytest.raises(KinaCallError, match="meta"):
        twice(torch.ones(4, device="meta"))  # type: ignore[operator]


def test_big_endian_array_is_a_call_error_that_says_what_to_do(twice: object) -> None:
    x = np.arange(4, dtype=">f4")
    with pytest.raises(KinaCallError) as e:
        twice(x)  # type: ignore[operator]
    msg = str(e.value)
    assert "big-endian" in msg and "astype" in msg, msg
    out = twice(x.astype("=f4"))  # type: ignore[operator]
    np.testing.assert_array_equal(np.asarray(out), 2 * np.arange(4, dtype=np.float32))


def test_wrong_dtype_help_is_python_not_kina(twice: object) -> None:
    with pytest.raises(KinaCallError) as e:
        twice(np.ones(4))  # type: ignore[operator]
    msg = str(e.value)
    assert "(cast" not in msg and "astype(np.float32)" in msg, msg


@pytest.mark.parametrize("name", [None, 3, ""])
def test_compile_name_must_be_a_name(ws: Path, name: object) -> None:
    with pytest.raises(KinaUsageError, match="name"):
        kinac.compile(ws, name)  # type: ignore[arg-type]


def test_unknown_name_does_not_suggest_a_cli_flag(ws: Path) -> None:
    with pytest.raises(KinaUsageError) as e:
        kinac.compile(ws, "twicee")
    msg = str(e.value)
    assert "--dims" not in msg and "twice" in msg, msg


def test_host_runtime_says_what_to_do_with_the_other_byte_order() -> None:
    from kinac.rt.host.arrays import as_host_array
    from kinac.rt.host.errors import KinaRuntimeError

    with pytest.raises(KinaRuntimeError, match=r"other byte order: pass x\.astype\('float32'\)"):
        as_host_array(np.zeros(3, ">f4"), "x", "f32", (3,))
