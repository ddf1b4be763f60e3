"""The command line end to end, as a user runs it: exit codes, JSON shapes, bad input, caches."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from cli_support import kinac_process

ROOT = Path(__file__).resolve().parent.parent
WS = ROOT / "workspaces"
sys.path.insert(0, str(ROOT / "benches"))
import wsgen  # noqa: E402


def kinac(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return kinac_process(*args, cwd=cwd)


def no_traceback(p: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in p.stderr and "Traceback" not in p.stdout, p.stderr


def kinac_here(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``kinac ARGS`` in this process (``kinac.cli.main``, what ``python -m kinac`` runs when
    no build server serves the workspace): exit code, stdout, stderr. For cases whose point is
    the message and the exit code, not the process; each command keeps a real process below."""
    from kinac.cli import main

    capsys.readouterr()
    try:
        code = main(list(args))
    except SystemExit as e:  # argparse: --help, usage errors
        code = e.code if isinstance(e.code, int) else 2
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err, out.err
    return code, out.out, out.err


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    dst = tmp_path / "transformer"
    shutil.copytree(WS / "transformer", dst, ignore=shutil.ignore_patterns(".kinac-cache"))
    return dst


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, object]]:
    """The transformer workspace built cold once, in a fresh process with ``--json``: the
    workspace, its cache and the build's document (read by the tests, never written)."""
    root = tmp_path_factory.mktemp("built")
    src = root / "transformer"
    shutil.copytree(WS / "transformer", src, ignore=shutil.ignore_patterns(".kinac-cache"))
    p = kinac("build", str(src), "--json", "--cache-dir", str(root / "cache"))
    assert p.returncode == 0, p.stderr
    return src, root / "cache", json.loads(p.stdout)


@pytest.fixture()
def warm(tmp_path: Path, built: tuple[Path, Path, dict[str, object]]) -> tuple[Path, str]:
    """A copy of the built workspace and of its cache (keys hold no absolute paths: the copy's
    build is a no-op), for a test that edits or clears them."""
    src, cache, _ = built
    shutil.copytree(src, tmp_path / "transformer")
    shutil.copytree(cache, tmp_path / "cache")
    return tmp_path / "transformer", str(tmp_path / "cache")


def test_help_is_fast_and_complete(capsys: pytest.CaptureFixture[str]) -> None:
    p = kinac("--help")
    assert p.returncode == 0
    for cmd in ("check", "build", "run", "watch", "cache", "explain"):
        assert cmd in p.stdout
    for cmd in ("check", "build", "run", "watch", "cache", "explain"):
        code, out, _ = kinac_here(capsys, cmd, "--help")  # the same parser, in this process
        assert code == 0 and "usage: kinac " + cmd in out
    assert kinac().returncode == 2  # no command: usage


def test_build_json_and_noop(built: tuple[Path, Path, dict], warm: tuple[Path, str]) -> None:
    doc = built[2]  # the cold build, in a fresh process (the fixture)
    ws, cache = warm
    assert {"queries_executed", "queries_reused", "executed", "diagnostics", "artifacts"} <= set(
        doc
    )
    assert doc["queries_executed"] > 20 and doc["diagnostics"] == []
    kinds = {(a["entry"], a["kind"]) for a in doc["artifacts"]}
    assert ("block_small", "object") in kinds and ("attention_small", "llvm-ir") in kinds
    assert {"query", "key"} <= set(doc["executed"][0])
    again = json.loads(kinac("build", str(ws), "--json", "--cache-dir", cache).stdout)
    assert again["queries_executed"] == 0 and again["artifacts"] == doc["artifacts"]


def test_why_names_the_changed_input(warm: tuple[Path, str]) -> None:
    ws, cache = warm  # built (a copy of the built fixture's cache)
    f = ws / "ffn.kina"
    f.write_text(f.read_text().replace("(rms-norm x wn)", "(rms-norm (neg x) wn)"))
    p = kinac("build", str(ws), "--json", "--why", "--cache-dir", cache)
    doc = json.loads(p.stdout)
    chains = {w["query"]: w["chain"] for w in doc["why"]}
    assert chains["check_defn"][-1] == "source_text(ffn.kina)"
    assert chains["check_defn"][0].startswith("check_defn(")


def test_check_errors_as_json_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.kina"
    bad.write_text(
        "(defn f [(x : (tensor f32 [N]))\n         (y : (tensor f32 [M]))] -> (tensor f32 [N])\n  (add x y))\n"
    )
    p = kinac("check", str(bad), "--format", "json", "--no-cache")
    no_traceback(p)
    assert p.returncode == 1
    (d,) = json.loads(p.stdout)
    assert d["code"].startswith("K") and d["severity"] == "error"
    assert d["primary"]["file"] == "bad.kina" and d["primary"]["line"] == 3
    assert d["counterexample"] and set(d["counterexample"]) == {"N", "M"}
    code, text, _ = kinac_here(capsys, "check", str(bad), "--no-cache", "--color", "never")
    assert code == 1
    assert f"error[{d['code']}]" in text and "bad.kina:3:" in text
    assert "counterexample" in text


@pytest.mark.parametrize(
    "src", ["(defn f [(x", ")))", "(defn f [] -> f32 (", "\x00\xff(", "(mesh)"]
)
def test_malformed_programs_never_traceback(
    tmp_path: Path, src: str, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "m.kina"
    f.write_text(src, encoding="utf-8", errors="surrogateescape")
    if src.isprintable():  # in this process (the same main)
        code, out, _ = kinac_here(capsys, "check", str(f), "--no-cache")
        assert code == 1 and "error[K01" in out
        return
    p = kinac("check", str(f), "--no-cache")  # bytes that are not text: through a real pipe
    no_traceback(p)
    assert p.returncode == 1 and "error[K01" in p.stdout


@pytest.mark.parametrize(
    ("toml", "needle"),
    [
        ('[workspace]\nname = "x"\n[target]\nkind = "tpu"\n', "target.kind"),
        (
            '[workspace]\nname = "x"\n[[entry]]\nname = "e"\ndims = { B = "four" }\n',
            "entry[0].dims.B",
        ),
        ('[workspace]\nnmae = "x"\n', "workspace.nmae"),
        ("[workspace\n", "not valid TOML"),
        ("[workspace]\n[solver]\nbudget_ms = -1\n", "solver.budget_ms"),
        (
            '[workspace]\nname = "x"\n[[entry]]\nname = "e"\ndims = { B = [2, 3] }\n',
            "lists are for variadic groups",
        ),
        (
            '[workspace]\nname = "x"\n[[entry]]\nname = "e"\ndims = { "..b" = 3 }\n',
            "takes a list of dims",
        ),
        (
            '[workspace]\nname = "x"\n[[entry]]\nname = "e"\ndims = { "..b" = [2, 0] }\n',
            "positive integers",
        ),
    ],
)
def test_bad_kina_toml_names_the_key_exit_2(
    ws: Path, toml: str, needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (ws / "kina.toml").write_text(toml)
    if needle != "not valid TOML":  # in this process (the same main)
        code, _, err = kinac_here(capsys, "build", str(ws), "--no-cache")
        assert code == 2 and needle in err
        return
    p = kinac("build", str(ws), "--no-cache")  # one in a real process: the exit status
    no_traceback(p)
    assert p.returncode == 2 and needle in p.stderr


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = kinac("check", str(tmp_path / "missing.kina"))
    assert p.returncode == 2 and "no such file" in p.stderr
    assert kinac_here(capsys, "explain", "K9999")[0] == 2
    assert kinac_here(capsys, "explain", "k0201")[0] == 0


def test_cache_commands(warm: tuple[Path, str]) -> None:
    ws, cache = warm  # built
    st = json.loads(kinac("cache", "stats", str(ws), "--cache-dir", cache).stdout)
    assert st["memos"] > 10 and st["values"] > 10
    assert (
        json.loads(kinac("cache", "verify", str(ws), "--cache-dir", cache).stdout)["dropped"] == 0
    )
    assert kinac("cache", "gc", str(ws), "--cache-dir", cache).returncode == 0
    assert kinac("cache", "clear", str(ws), "--cache-dir", cache).returncode == 0
    assert json.loads(kinac("cache", "stats", str(ws), "--cache-dir", cache).stdout)["memos"] == 0


def test_cache_dir_precedence(ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (ws / "kina.toml").write_text(
        (ws / "kina.toml")
        .read_text()
        .replace('name = "transformer"', 'name = "transformer"\ncache_dir = "from-toml"')
    )
    assert kinac_here(capsys, "check", str(ws))[0] == 0
    assert (ws / "from-toml").is_dir()
    env_dir = tmp_path / "from-env"
    p = kinac_process("check", str(ws), env={"KINAC_CACHE_DIR": str(env_dir)})
    assert p.returncode == 0 and env_dir.is_dir()


def test_two_processes_building_at_once(tmp_path: Path) -> None:
    ws = tmp_path / "gen"
    wsgen.generate(ws, 12, 6)
    cache = str(tmp_path / "cache")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    cmd = [sys.executable, "-m", "kinac", "build", str(ws), "--json", "--cache-dir", cache]
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    docs = [json.loads(o) for o, _ in outs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    assert docs[0]["diagnostics"] == docs[1]["diagnostics"] == []
    third = json.loads(kinac("build", str(ws), "--json", "--cache-dir", cache).stdout)
    assert third["queries_executed"] == 0
    clean = json.loads(kinac("build", str(ws), "--json", "--no-cache").stdout)
    assert clean["diagnostics"] == third["diagnostics"] and clean["artifacts"] == third["artifacts"]


def test_watch_rebuilds_on_save_and_survives_a_broken_file(
    ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kinac.session import Session
    from kinac.watch import watch

    sess = Session(ws, cache_dir=str(tmp_path / "cache"))
    stop = threading.Event()
    t = threading.Thread(target=watch, args=(sess, stop), daemon=True)
    t.start()

    def wait_for(n_lines: int) -> str:
        deadline = time.time() + 30
        out = ""
        while time.time() < deadline:
            out += capsys.readouterr().out
            if out.count("queries run") >= n_lines:
                return out
            time.sleep(0.05)
        raise AssertionError(f"watch did not rebuild: {out!r}")

    wait_for(1)
    time.sleep(0.3)
    (ws / "ffn.kina").write_text((ws / "ffn.kina").read_text().replace("(swiglu", "(swiglu (("))
    out = wait_for(1)
    assert "error[K01" in out
    (ws / "ffn.kina").write_text((ws / "ffn.kina").read_text().replace("(swiglu ((", "(swiglu"))
    out = wait_for(1)
    assert "no errors" in out
    stop.set()
    t.join(timeout=10)
    assert not t.is_alive()


def test_cache_size_limit_from_kina_toml(ws: Path, tmp_path: Path) -> None:
    (ws / "kina.toml").write_text(
        (ws / "kina.toml").read_text() + "\n[cache]\nsize_limit_mb = 64\n"
    )
    st = json.loads(kinac("cache", "stats", str(ws), "--cache-dir", str(tmp_path / "c")).stdout)
    assert st["size_limit"] == 64 * 1024**2


def test_every_code_kinac_emits_has_an_explanation() -> None:
    import re

    from kinac.diag.explain import explanation

    used = set()
    for p in (ROOT / "kinac").rglob("*.py"):
        used |= set(re.findall(r'"(K\d{4})"', p.read_text()))
    assert used and all(explanation(c) for c in used), sorted(c for c in used if not explanation(c))


def test_a_broken_defn_does_not_cascade_into_its_callers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "b.kina"
    f.write_text(
        "(defn g [(x : f32)] f32 x)\n"  # no `->`: dropped by the reader
        "(defn f [(x : f32)] -> f32 (g x))\n"  # calls it: no second error
        "(defn h [(x : f32)] -> f32 (gg x))\n"
    )  # a real unknown name still is one
    _, out, _ = kinac_here(capsys, "check", str(f), "--format", "json", "--no-cache")
    got = [(d["code"], d["primary"]["line"]) for d in json.loads(out)]
    assert got == [("K0116", 1), ("K0202", 3)]


def test_run_with_seed_and_with_npz_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import numpy as np

    ws = tmp_path / "mlp"
    shutil.copytree(WS / "mlp", ws, ignore=shutil.ignore_patterns(".kinac-cache"))
    p = kinac(
        "run", str(ws), "mlp", "--seed", "3", "--repeat", "2", "--save", str(tmp_path / "out.npz")
    )
    assert p.returncode == 0, p.stderr
    assert "out 0      f32[4, 128, 256]" in p.stdout and "median" in p.stdout
    r = np.random.default_rng(0)
    arrays = {
        "x": r.standard_normal((4, 128, 256), dtype=np.float32),
        "w1": r.standard_normal((256, 1024), dtype=np.float32) * 0.05,
        "b1": r.standard_normal(1024, dtype=np.float32),
        "w2": r.standard_normal((1024, 256), dtype=np.float32) * 0.05,
        "b2": r.standard_normal(256, dtype=np.float32),
    }
    np.savez(tmp_path / "in.npz", **arrays)  # type: ignore[arg-type]
    p = kinac(
        "run",
        str(ws),
        "mlp",
        "--inputs",
        str(tmp_path / "in.npz"),
        "--repeat",
        "1",
        "--save",
        str(tmp_path / "out2.npz"),
    )
    assert p.returncode == 0, p.stderr
    import torch

    t = {k: torch.from_numpy(v) for k, v in arrays.items()}
    want = (torch.nn.functional.gelu(t["x"] @ t["w1"] + t["b1"]) @ t["w2"] + t["b2"]).numpy()
    got = np.load(tmp_path / "out2.npz")["arr_0"]
    assert np.max(np.abs(got - want)) / np.max(np.abs(want)) < 1e-5
    del arrays["b2"]
    np.savez(tmp_path / "bad.npz", **arrays)  # type: ignore[arg-type]
    code, _, err = kinac_here(capsys, "run", str(ws), "mlp", "--inputs", str(tmp_path / "bad.npz"))
    assert code == 2 and "lacks arrays named b2" in err


class _FakeCudaArray:
    """Just enough of a CUDA tensor for the API's placement check (no GPU needed)."""

    def __init__(self, shape: tuple[int, ...], index: int) -> None:
        self.shape, self.dtype, self.index = shape, "float32", index

    def __dlpack_device__(self) -> tuple[int, int]:
        return (2, self.index)


def test_api_rejects_arrays_on_the_wrong_device() -> None:
    import numpy as np

    import kinac
    from kinac.errors import KinaCallError

    f = kinac.compile(WS / "transformer", "ffn", no_cache=True)
    r = np.random.default_rng(0)
    wn, wg, wu, wd = (
        r.standard_normal(s, dtype=np.float32) for s in ((8,), (8, 16), (8, 16), (16, 8))
    )
    with pytest.raises(KinaCallError, match="lives on cuda:0 but `ffn` is compiled for the CPU"):
        f(_FakeCudaArray((2, 8), 0), wn, wg, wu, wd)
    g = kinac.compile(WS / "transformer", "ffn", target="cuda", no_cache=True)
    with pytest.raises(
        KinaCallError, match="lives on cuda:1, but unannotated parameters run on cuda:0"
    ):
        g(_FakeCudaArray((2, 8), 1), wn, wg, wu, wd)


def test_run_on_cuda_without_a_gpu_explains_itself(tmp_path: Path) -> None:
    from kinac.rt import cuda

    if cuda.available():
        pytest.skip("this machine has a GPU: the run would succeed")
    ws = tmp_path / "mlp"
    shutil.copytree(WS / "mlp", ws, ignore=shutil.ignore_patterns(".kinac-cache"))
    p = kinac("run", str(ws), "mlp", "--target", "cuda", "--repeat", "1")
    no_traceback(p)
    assert p.returncode == 1
    assert (
        p.stderr.startswith("kinac: error: ")
        and "help: --target cuda runs on an NVIDIA GPU" in p.stderr
    )


def test_api_fast_path_reuses_specialisations_and_still_checks_every_call() -> None:
    import numpy as np
    import torch

    import kinac
    from kinac.errors import KinaCallError

    f = kinac.compile(WS / "transformer", "ffn", no_cache=True)
    r = np.random.default_rng(1)
    ws = [r.standard_normal(s, dtype=np.float32) for s in ((8,), (8, 16), (8, 16), (16, 8))]

    x2 = r.standard_normal((2, 8), dtype=np.float32)
    first = np.array(f(x2, *ws), copy=True)
    assert len(f._entries) == 1 and len(f._fast) == 1
    for _ in range(3):  # the fast path: same specialisation, same answer on new data
        x = r.standard_normal((2, 8), dtype=np.float32)
        got = np.asarray(f(x, *ws))
        want = np.asarray(f._entries[next(iter(f._entries))](x, *ws))
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.asarray(f(x2, *ws)), first)
    assert len(f._entries) == 1 and len(f._fast) == 1
    t = [torch.from_numpy(a) for a in (x2, *ws)]  # torch tensors: their own fast key
    np.testing.assert_allclose(np.asarray(f(*t)), first, rtol=1e-6)
    assert len(f._entries) == 1 and len(f._fast) == 2
    x5 = r.standard_normal((5, 8), dtype=np.float32)  # a new batch size: a new specialisation
    assert np.asarray(f(x5, *ws)).shape == (5, 8) and len(f._entries) == 2
    with pytest.raises(KinaCallError, match="wg"):  # a wrong shape is still refused
        f(x2, ws[0], ws[1][:4], ws[2], ws[3])
    with pytest.raises(KinaCallError, match="takes 5 arrays"):
        f(x2, *ws[:3])


def test_sharded_dims_are_checked_at_entries_and_calls(tmp_path: Path) -> None:
    """`@sharded` over a mesh declared in kina.toml: an entry whose dims the mesh does not
    divide is K0802 at build; a Python call with such a shape is refused before it runs."""
    import numpy as np

    import kinac as api
    from kinac.errors import KinaCallError

    ws = tmp_path / "sharded"
    ws.mkdir()
    (ws / "kina.toml").write_text(
        '[workspace]\nname = "sharded"\n\n[[mesh]]\nname = "grid"\nshape = [2, 4]\naxes = ["dp", "tp"]\n\n'
        '[[entry]]\nname = "uneven"\ndefn = "f"\ndims = { N = 2, D = 6 }\n\n'
        '[[entry]]\nname = "uneven_batch"\ndefn = "fb"\ndims = { "..b" = [3, 5], D = 4 }\n'
    )
    (ws / "a.kina").write_text(
        "(defn f [(x : (tensor f32 [N D] @sharded(axis=1, mesh=grid, over=tp)))] -> (tensor f32 [N D])\n"
        "  (add x x))\n"
        "(defn fb [(x : (tensor f32 [..b D] @sharded(axis=0, mesh=grid, over=dp)))] -> (tensor f32 [..b D])\n"
        "  (add x x))\n"
    )
    p = kinac("build", str(ws), "--no-cache")
    no_traceback(p)
    assert p.returncode == 1
    out = p.stdout + p.stderr
    assert "K0802" in out and "4 does not divide D = 6" in out
    assert "2 does not divide 3 (the shape is [3, 5, 4])" in out  # axis 0 of [..b D]
    f = api.compile(ws, "f", no_cache=True)
    np.testing.assert_array_equal(np.asarray(f(np.ones((2, 8), np.float32))), np.full((2, 8), 2.0))
    with pytest.raises(KinaCallError, match="split over mesh `grid` axes `tp` \\(4 devices\\)"):
        f(np.ones((2, 6), np.float32))
    fb = api.compile(ws, "fb", no_cache=True)
    assert np.asarray(fb(np.ones((4, 3, 2), np.float32))).shape == (4, 3, 2)
    with pytest.raises(
        KinaCallError, match="`fb` has dim 0 of `x` split over mesh `grid` axes `dp`"
    ):
        fb(np.ones((3, 2), np.float32))
