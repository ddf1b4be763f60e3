"""Generated bad input never gives a traceback, only the documented exit codes and errors.

Drives the command line in-process (``kinac.cli.main``), as a real subprocess, and the Python
API (``kinac.compile`` and a compiled call) with malformed programs (random bytes, truncated or
unbalanced S-expressions, wrong types, huge numbers), bad ``kina.toml`` files (bad TOML, wrong
types, unknown keys), bad ``.npz`` inputs (wrong names, shapes, dtypes; corrupt files) and bad
arguments (negative or huge ``--seed``/``--repeat``, unknown dims and dtypes).

The contract (README, "Using kinac"): exit 0 clean, 1 errors in the program, 2 usage or
configuration errors; a failure says ``kinac: error: ...`` (argparse: ``kinac CMD: error:``) or
renders a diagnostic (``error[KNNNN]``); exit 3 (``kinac: internal error``) is a kinac bug. The
API raises ``kinac.errors.KinaError`` subclasses only. Example counts are small (the whole file
runs in well under a minute); ``KINAC_HYPOTHESIS_RANDOM=1`` explores new examples.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kinac.cli import main
from kinac.errors import KinaError

ROOT = Path(__file__).resolve().parent.parent
FEW = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
TINY_KINA = """\
(defn tiny [(x : (tensor f32 [N D])) (w : (tensor f32 [D]))] -> (tensor f32 [N D])
  (let [(y (mul x w))
        (z (add y 1.0))]
    (gelu z)))
"""
TINY_TOML = """\
[workspace]
name = "t"

[target]
kind = "cpu"

[[entry]]
name = "tiny"
defn = "tiny"
dims = { N = 2, D = 3 }
"""
# a failure line: ours, argparse's (``kinac run: error:``), or a rendered diagnostic
FAILURE = re.compile(r"^(kinac( \w+)?: error: |error\[K\d{4}\])", re.MULTILINE)


@contextlib.contextmanager
def workspace(kina: str | bytes = TINY_KINA, toml: str | bytes = TINY_TOML) -> Iterator[Path]:
    """A throwaway workspace (tmp_path does not reset between hypothesis examples)."""
    with tempfile.TemporaryDirectory(prefix="kinac-bad-") as d:
        ws = Path(d)
        for name, text in (("t.kina", kina), ("kina.toml", toml)):
            data = text.encode() if isinstance(text, str) else text
            (ws / name).write_bytes(data)
        yield ws


def cli(*argv: str) -> tuple[int, str, str]:
    """``kinac ARGV`` in this process: exit code, stdout, stderr (argparse's exit included)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as e:  # argparse: --help, usage errors
            code = e.code if isinstance(e.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def assert_documented(code: int, out: str, err: str, allowed: set[int], what: object) -> None:
    """The contract: an allowed exit code, no traceback, a failure that says what it is."""
    ctx = f"{what!r}\nexit {code}\nstdout: {out[-1500:]}\nstderr: {err[-1500:]}"
    assert "Traceback" not in out + err, ctx
    assert "internal error" not in err, ctx
    assert code in allowed, ctx
    if code != 0:
        assert FAILURE.search(err) or FAILURE.search(out) or out.lstrip()[:1] in ("{", "["), ctx


# ---------------------------------------------------------------- programs

TOKENS = [
    "(", ")", "[", "]", "f32", "i32", "bf16", "f99", "tensor", "N", "D", "0", "-1",
    "99999999999999999999999999", "3000000000", "1e999", "-inf", "nan", "0.5", ":axis",
    "\u00e9t\u00e9", '"', ";", "#", "defn", "let", "->", "(tensor f32 [N D])", "(tensor i32 [])",
]  # fmt: skip


# bodies for ``tiny`` that are wrong in ways the reader cannot see: types, huge numbers, axes
BODIES = [
    "(iota i32 [N] :axis 5)", "(full i32 [N D] 3000000000)", "(lt x 3000000000)",
    "(full f32 [N D] 1e999)", "(reshape x [99999999999 99999999999])", "(iota f32 [N -1] :axis 0)",
    "(slice x :axis 0 :start 0 :stop 99999999999999999999)", "(to-device x :device cuda:0)",
    "(matmul x w)", "(cast x :to f99)", "(sum x :axis 7 :keepdims true)", "(gather w x)",
    "(broadcast-to w [N D 0])", "(repeat-interleave x :repeats -1 :axis 0)",
    "(concat [x w] :axis 0)", "(softmax x :axis -3)", "(transpose x :perm [0 0])",
]  # fmt: skip


def chain(depth: int) -> str:
    """``tiny`` as ``depth`` chained lets (deep programs must not exhaust the stack)."""
    binds = " ".join(f"(v{i + 1} (neg v{i}))" for i in range(depth))
    return (
        "(defn tiny [(x : (tensor f32 [N D])) (w : (tensor f32 [D]))] -> (tensor f32 [N D])\n"
        f"  (let [(v0 (mul x w)) {binds}] v{depth}))\n"
    )


@st.composite
def bad_program(draw: st.DrawFn) -> bytes:
    """A mangled version of a good program, a wrong body, a deep one, or bytes."""
    kind = draw(st.sampled_from(["bytes", "truncate", "replace", "insert", "delete", "body"]))
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "body":
        if draw(st.integers(0, 5)) == 0:
            return chain(draw(st.sampled_from([40, 700]))).encode()
        head = TINY_KINA.split("\n")[0]
        return f"{head}\n  {draw(st.sampled_from(BODIES))})\n".encode()
    toks = re.findall(r"\(|\)|\[|\]|[^\s()\[\]]+", TINY_KINA)
    i = draw(st.integers(0, len(toks) - 1))
    if kind == "truncate":
        toks = toks[:i]
    elif kind == "replace":
        toks[i] = draw(st.sampled_from(TOKENS))
    elif kind == "insert":
        toks.insert(i, draw(st.sampled_from(TOKENS)))
    else:
        del toks[i]
    return " ".join(toks).encode()


@FEW
@given(src=bad_program())
def test_check_bad_programs(src: bytes) -> None:
    with workspace(kina=src) as ws:
        code, out, err = cli("check", str(ws / "t.kina"))
        assert_documented(code, out, err, {0, 1}, src)
        try:
            src.decode("utf-8")
        except UnicodeDecodeError:  # not text: a diagnostic, never "no errors"
            assert code == 1, (src, out, err)
        code, out, err = cli("check", "--format", "json", str(ws / "t.kina"))
        assert_documented(code, out, err, {0, 1}, src)


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(src=bad_program())
@example(src=b"(defn tiny")  # unreadable: run must show the reader's diagnostic
def test_run_bad_programs(src: bytes) -> None:
    with workspace(kina=src) as ws:
        code, out, err = cli("run", str(ws), "tiny", "--repeat", "1", "--cache-dir", str(ws / "c"))
        assert_documented(code, out, err, {0, 1}, src)
        # never "no entry named X (did you mean X?)" about the entry that exists
        assert not re.search(r"named `([^`]+)`[^\n]*did you mean `\1`", out + err), err
        _c, check_out, check_err = cli("check", str(ws / "t.kina"))
        codes = set(re.findall(r"error\[(K\d{4})\]", check_out + check_err))
        if codes:  # run reports the program's own errors, not a consequence of them
            assert codes & set(re.findall(r"error\[(K\d{4})\]", out + err)), (src, codes, err)


# ---------------------------------------------------------------- kina.toml

ODD_VALUES = st.sampled_from(
    ["1", "-1", "0", "3.5", '"x"', '""', "true", "[]", "[1, 2]", "{}", "99999999999999999999",
     '"f99"', '"cuda"', '"cpu"', '{ N = -2, D = 3 }', '{ N = 2 }', '{ N = 2, D = 3, Q = 4 }',
     '{ N = "2", D = 3 }', '{ N = 2, D = 9223372036854775807 }', '"../.."', '"\u00e9"']
)  # fmt: skip
KEYS = st.sampled_from(
    [("workspace", "name"), ("workspace", "cache_dir"), ("workspace", "nosuch"),
     ("target", "kind"), ("target", "device"), ("target", "nosuch"), ("solver", "budget_ms"),
     ("solver", "on_unknown"), ("cache", "max_bytes"), ("entry", "name"), ("entry", "defn"),
     ("entry", "dims"), ("entry", "dtypes"), ("entry", "nosuch"), ("nosuch", "key")]
)  # fmt: skip


@st.composite
def bad_toml(draw: st.DrawFn) -> bytes:
    """``kina.toml`` with one key set to an odd value, or mangled text."""
    if draw(st.booleans()):
        table, key = draw(KEYS)
        value = draw(ODD_VALUES)
        lines = [ln for ln in TINY_TOML.splitlines() if not ln.startswith(f"{key} =")]
        header = "[[entry]]" if table == "entry" else f"[{table}]"
        if header in lines:
            lines.insert(lines.index(header) + 1, f"{key} = {value}")
        else:
            lines += [header, f"{key} = {value}"]
        return "\n".join(lines).encode() + b"\n"
    text = TINY_TOML.encode()
    cut = draw(st.integers(0, len(text)))
    return text[:cut] + draw(st.binary(max_size=12)) + text[cut + draw(st.integers(0, 8)) :]


@FEW
@given(toml=bad_toml())
def test_bad_kina_toml(toml: bytes) -> None:
    with workspace(toml=toml) as ws:
        cache = ["--cache-dir", str(ws / "c")]
        code, out, err = cli("build", str(ws), *cache)
        assert_documented(code, out, err, {0, 1, 2}, toml)
        code, out, err = cli("run", str(ws), "tiny", "--repeat", "1", *cache)
        assert_documented(code, out, err, {0, 1, 2}, toml)


# ---------------------------------------------------------------- .npz inputs

DTYPES = st.sampled_from(["float32", "float64", "float16", "int32", "int64", "bool", "complex64",
                          "uint8", "U3", "datetime64[s]"])  # fmt: skip
GOOD_INPUTS = {"x": ((2, 3), "float32"), "w": ((3,), "float32")}


@st.composite
def bad_npz(draw: st.DrawFn) -> dict[str, np.ndarray] | bytes:
    """The right arrays with one thing wrong (a name, shape or dtype; one missing or extra),
    or a corrupt or truncated file."""
    spec = dict(GOOD_INPUTS)
    how = draw(st.sampled_from(["shape", "dtype", "rename", "drop", "extra", "corrupt", "cut"]))
    victim = draw(st.sampled_from(sorted(spec)))
    if how in ("corrupt", "cut"):
        good = io.BytesIO()
        np.savez(good, **{k: np.zeros(sh, dt) for k, (sh, dt) in spec.items()})  # type: ignore[arg-type]
        data = good.getvalue()
        if how == "cut":
            return data[: draw(st.integers(0, len(data) - 1))]
        at = draw(st.integers(0, len(data) - 1))
        return data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at + 8 :]
    shape, dtype = spec[victim]
    if how == "shape":
        spec[victim] = (tuple(draw(st.lists(st.integers(0, 5), max_size=3))), dtype)
    elif how == "dtype":
        spec[victim] = (shape, draw(DTYPES))
    elif how == "rename":
        spec[draw(st.sampled_from(["y", "X", "arr_0", "x ", "\u00e9"]))] = spec.pop(victim)
    elif how == "drop":
        del spec[victim]
    else:
        spec[draw(st.sampled_from(["y", "arr_0", "extra"]))] = ((1,), "float32")
    return {k: np.zeros(sh, dt) for k, (sh, dt) in spec.items()}


@FEW
@given(content=bad_npz(), suffix=st.sampled_from([".npz", ".npz", ".npy"]))
@example(content=b"PK\x03\x04", suffix=".npz")  # a zip header and nothing else
def test_run_bad_inputs_files(content: dict[str, np.ndarray] | bytes, suffix: str) -> None:
    with workspace() as ws:
        path = ws / f"in{suffix}"
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif suffix == ".npz":
            np.savez(path, **content)  # type: ignore[arg-type]
        else:
            np.save(path, next(iter(content.values()), np.zeros(())))
        code, out, err = cli("run", str(ws), "tiny", "--inputs", str(path), "--repeat", "1")
        assert_documented(code, out, err, {0, 1, 2}, (suffix, content))
        if code == 0:  # only the right arrays run (an extra one is a mistake too)
            assert isinstance(content, dict), (content, out)
            got = {k: (v.shape, str(v.dtype)) for k, v in content.items()}
            assert suffix == ".npz" and got == GOOD_INPUTS, (suffix, got, out)


# ---------------------------------------------------------------- arguments

GARBAGE = st.sampled_from(["", "x", "1.5", "1e3", "-0", "0x10", " 3", "\u0663"])
PERTURB = {
    "--seed": st.one_of(st.integers(-(2**70), 2**70), GARBAGE),
    "--repeat": st.one_of(st.integers(-(2**70), 3), GARBAGE),  # a huge count runs for ever
    "--dims": st.sampled_from(["", "N=2", "N=2,D=3", "N=-1,D=3", "N=2,D=3,Q=1", "N=x", "=",
                               "N=99999999999999999999,D=1", "N=2,,D=3", "N=0,D=3"]),
    "--dtypes": st.sampled_from(["", "T=f99", "T=f32", "=f32", "Q=f32", "T"]),
    "--inputs": st.sampled_from(["nosuch.npz", ".", "t.kina", "kina.toml"]),
    "--save": st.sampled_from([".", "nosuch/out.npz", "t.kina/out.npz"]),
    "--target": st.sampled_from(["cuda", "tpu", ""]),
    "entry": st.sampled_from(["nosuch", "", "-x", "tiny tiny"]),
    "path": st.sampled_from(["nosuch", "t.kina", "kina.toml", "c"]),
}  # fmt: skip


@FEW
@given(data=st.data(), which=st.sets(st.sampled_from(sorted(PERTURB)), min_size=1, max_size=2))
def test_run_bad_arguments(data: st.DataObject, which: set[str]) -> None:
    """A valid ``kinac run`` with one or two arguments made bad."""
    with workspace() as ws:
        args = {"path": str(ws), "entry": "tiny", "--seed": "0", "--repeat": "1"}
        for key in sorted(which):
            value = str(data.draw(PERTURB[key], label=key))
            is_file = key in ("--inputs", "--save", "path") and value not in ("", ".")
            args[key] = str(ws / value) if is_file else value
        argv = ["run", args.pop("path"), args.pop("entry")]
        argv += [f"{k}={v}" for k, v in args.items()] + ["--cache-dir", str(ws / "c")]
        code, out, err = cli(*argv)
        assert_documented(code, out, err, {0, 1, 2}, argv)


# ---------------------------------------------------------------- a real process


@settings(max_examples=1, deadline=None, suppress_health_check=list(HealthCheck))
@given(src=bad_program(), seed=st.integers(-(2**65), 2**65))
@example(src=b"(defn tiny \xff\x00 [(x", seed=0)  # not UTF-8, unbalanced
@example(src=TINY_KINA.encode(), seed=-(2**65))  # a good program, a seed no int64 holds
def test_subprocess_bad_program_and_seed(src: bytes, seed: int) -> None:
    """The installed entry point, in its own process: the same contract, end to end (the
    process boundary: the exit status and the real pipes; the generated cases run in-process
    above, so one generated case and two chosen ones here)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("KINAC_DEBUG", None)
    with workspace(kina=src) as ws:
        for argv in (["check", str(ws / "t.kina")], ["run", str(ws), "tiny", f"--seed={seed}"]):
            p = subprocess.run(
                [sys.executable, "-m", "kinac", *argv, "--cache-dir", str(ws / "c")]
                if argv[0] == "run"
                else [sys.executable, "-m", "kinac", *argv],
                capture_output=True,
                text=True,
                env=env,
                timeout=120,
                check=False,
            )
            allowed = {0, 1} if argv[0] == "check" else {0, 1, 2}
            assert_documented(p.returncode, p.stdout, p.stderr, allowed, (argv, src))


# ---------------------------------------------------------------- the Python API

ARRAYS = st.sampled_from(
    [np.zeros((2, 3), np.float32), np.zeros((3,), np.float32), np.zeros((2, 4), np.float32),
     np.zeros((2, 3), np.float64), np.zeros((2, 3), np.int32), np.zeros((), np.float32),
     np.zeros((0, 3), np.float32), np.zeros((2, 3), np.complex64), "x", None, 3.0, [1.0, 2.0]]
)  # fmt: skip


@FEW
@given(
    name=st.sampled_from(["tiny", "nosuch", "", "(tiny)"]),
    target=st.sampled_from(["cpu", "gpu", "", "cuda:x"]),
    args=st.lists(ARRAYS, max_size=3),
    src=st.one_of(st.just(TINY_KINA.encode()), bad_program()),
)
def test_api_bad_inputs(name: str, target: str, args: list[object], src: bytes) -> None:
    import kinac

    with workspace(kina=src) as ws:
        os.environ["KINAC_CACHE_DIR"] = str(ws / "c")
        try:
            fn = kinac.compile(ws, name, target=target)
            fn(*args)
        except KinaError:
            pass  # the documented failure: a message, no traceback needed
        finally:
            os.environ.pop("KINAC_CACHE_DIR", None)
