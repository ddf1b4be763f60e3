"""What a new user and an adversarial tester hit on the paths added since issue 15 (watch, the
build server, the workspace options, run/launch flags): each case failed before its fix.

Every case is in-process and small (well under 2 s): bad input must end as a ``kinac: error:``
line or a diagnostic with a K-code, never an internal error or silence.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent
MLP = ROOT / "workspaces" / "mlp"


def kinac_here(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``kinac ARGS`` in this process: exit code, stdout, stderr (no traceback, no ICE)."""
    from kinac.cli import main

    capsys.readouterr()
    try:
        code = main(list(args))
    except SystemExit as e:  # argparse's usage errors
        code = e.code if isinstance(e.code, int) else 2
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err, out.err
    assert "internal error" not in out.out + out.err, out.err
    return code, out.out, out.err


def mlp_copy(dst: Path, toml_extra: str = "", toml: str | None = None) -> Path:
    """The MLP workspace at ``dst`` (no cache), its kina.toml replaced or extended."""
    shutil.copytree(MLP, dst, ignore=shutil.ignore_patterns(".kinac-cache"))
    cfg = dst / "kina.toml"
    cfg.write_text((toml if toml is not None else cfg.read_text()) + toml_extra)
    return dst


# ---------------------------------------------------------------- kinac watch


def test_watch_sees_edits_of_a_workspace_under_a_hidden_directory(tmp_path: Path) -> None:
    """``kinac watch ~/.work/ws`` ignored every save: the filter skipped any path with a
    hidden directory among its last components, the workspace's own ancestors included."""
    from kinac.watch import _relevant

    root = tmp_path / ".hidden" / "ws"
    sess = SimpleNamespace(
        ws=SimpleNamespace(root=root, config_path=root / "kina.toml"),
        cache_dir=root / ".kinac-cache",
        reads_folder=lambda rel: rel == "models",  # the folder the last build read from
    )
    assert _relevant(sess, root / "mlp.kina")
    assert _relevant(sess, root / "kina.toml")
    assert _relevant(sess, root / "models" / "a.kina")
    # inside the workspace, hidden folders, __pycache__ and the cache are still not sources
    assert not _relevant(sess, root / ".git" / "a.kina")
    assert not _relevant(sess, root / "sub" / ".backup" / "a.kina")
    assert not _relevant(sess, root / "__pycache__" / "a.kina")
    assert not _relevant(sess, root / ".kinac-cache" / "x.kina")
    assert not _relevant(sess, root / "notes.txt")
    assert _relevant(sess, root / "models")  # a folder of sources moved away


# ---------------------------------------------------------------- kina.toml


@pytest.mark.parametrize(
    ("extra", "key", "words"),
    [
        # an internal error before (SQLite's INTEGER overflowed in the cache's size limit)
        ("[cache]\nsize_limit_mb = 99999999999999999999999\n", "cache.size_limit_mb", "<="),
        # accepted before: 10^23 simulated devices
        ('[[mesh]]\nname = "g"\nshape = [99999999999999999999999]\n', "mesh[0].shape", "devices"),
        ('[[mesh]]\nname = "g"\nshape = [4096, 4096]\n', "mesh[0].shape", "devices"),
    ],
)
def test_kina_toml_values_past_their_range_are_configuration_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: str, key: str, words: str
) -> None:
    ws = mlp_copy(tmp_path / "ws", "\n" + extra)
    code, _, err = kinac_here(capsys, "build", str(ws), "--no-server", "--no-cache")
    assert code == 2, err
    assert f"kinac: error: kina.toml: {key}: " in err and words in err, err


@pytest.mark.parametrize(
    ("workspace", "key"),
    [
        ('sources = ["../../**/*.kina"]', "workspace.sources[0]"),  # built 0 files before
        ('sources = ["/etc/*"]', "workspace.sources[0]"),
        ('sources = ["**/*.kina", ""]', "workspace.sources[1]"),
        ('exclude = ["sub/../../x.kina"]', "workspace.exclude[0]"),
    ],
)
def test_source_patterns_that_leave_the_workspace_are_configuration_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], workspace: str, key: str
) -> None:
    """Sources resolve relative to the root and never outside it (docs/language.md): a
    pattern that could only match outside it matched nothing, silently ("built 0 files")."""
    ws = mlp_copy(tmp_path / "ws", toml=f'[workspace]\nname = "x"\n{workspace}\n')
    code, _, err = kinac_here(capsys, "build", str(ws), "--no-server", "--no-cache")
    assert code == 2, err
    assert f"kinac: error: kina.toml: {key}: " in err and "workspace" in err, err


def test_an_entry_file_outside_the_workspace_is_a_configuration_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: `no defn named mlp in the workspace` (K0151), which sent the user looking for
    the defn rather than at the path."""
    ws = mlp_copy(tmp_path / "ws", '\n[[entry]]\nname = "m2"\ndefn = "mlp"\nfile = "../m.kina"\n')
    code, _, err = kinac_here(capsys, "build", str(ws), "--no-server", "--no-cache")
    assert code == 2, err
    assert "kinac: error: kina.toml: entry[1].file: " in err and "workspace" in err, err


@pytest.mark.parametrize(
    ("sources", "words"), [('["src/*.kina"]', "src/*.kina"), ("[]", "sources is empty")]
)
def test_sources_that_select_none_of_the_files_are_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sources: str, words: str
) -> None:
    """`sources = ["src/*.kina"]` in a workspace whose files are elsewhere built nothing and
    said only "built 0 files: no errors" (exit 0): a typo must not pass silently."""
    ws = mlp_copy(tmp_path / "ws", toml=f'[workspace]\nname = "x"\nsources = {sources}\n')
    for command in ("build", "check"):
        code, out, err = kinac_here(capsys, command, str(ws), "--no-server", "--no-cache")
        assert code == 0, err
        assert "kinac: warning: kina.toml: workspace.sources" in err, err
        assert words in err and "mlp.kina" in err, err


# ---------------------------------------------------------------- flags


@pytest.mark.parametrize(
    "args",
    [
        # an internal error before (OverflowError from bind())
        ("run", "MLP", "mlp", "--metrics-port", "65536"),
        # accepted before; each rank then failed on its own, the error printed once per rank
        ("launch", "-n", "2", "--master-port", "99999", "--", "true"),
        ("launch", "-n", "2", "--master-port", "0", "--", "true"),
    ],
)
def test_a_port_out_of_range_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...]
) -> None:
    argv = [str(MLP) if a == "MLP" else a for a in args]
    code, _, err = kinac_here(capsys, *argv)
    assert code == 2, err
    assert "port" in err and "65535" in err, err


# ---------------------------------------------------------------- programs near the limits


def test_a_tensor_of_more_than_64_axes_is_a_diagnostic(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rank 300 built and then `kinac run` died in numpy ('maximum supported dimension for an
    ndarray is currently 64'), an internal error: K0806 at the parameter now."""
    ones = " ".join("1" for _ in range(65))
    (tmp_path / "a.kina").write_text(
        f"(defn a [(x : (tensor f32 [{ones}]))] -> (tensor f32 [{ones}]) (neg x))\n"
    )
    (tmp_path / "kina.toml").write_text('[workspace]\nname = "r"\n[[entry]]\nname = "a"\n')
    code, out, err = kinac_here(capsys, "build", str(tmp_path), "--no-server", "--no-cache")
    assert code == 1, err
    assert "error[K0806]" in out + err and "65 axes" in out + err and "64" in out + err
    code, out, err = kinac_here(capsys, "run", str(tmp_path), "a", "--no-cache")
    assert code == 1 and "K0806" in out + err, err


# ---------------------------------------------------------------- kinac run's inputs


def test_dims_that_contradict_a_kina_toml_entry_name_the_flag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`kinac run workspaces/mlp mlp --dims B=1` said "argument `x` has shape [1, 128, 256],
    but entry `mlp` expects [4, 128, 256]": the user passed no argument; the flag is wrong."""
    code, _, err = kinac_here(capsys, "run", str(MLP), "mlp", "--dims", "B=1", "--no-cache")
    assert code == 2, err
    assert "--dims B=1" in err and "B = 4" in err and "argument `x`" not in err, err
    code, _, err = kinac_here(capsys, "run", str(MLP), "mlp", "--dtypes", "T=f64", "--no-cache")
    assert code == 2 and "--dtypes" in err, err  # mlp has no dtype variable: K0152's usage error


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b'{"traceEvents": []}', "not a .npy or .npz file"),  # numpy's pickle advice before
        (b"", "not a .npy or .npz file"),
    ],
)
def test_an_inputs_file_that_is_not_numpy_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, words: str
) -> None:
    f = tmp_path / "in.json"
    f.write_bytes(content)
    code, _, err = kinac_here(capsys, "run", str(MLP), "mlp", "--inputs", str(f), "--no-cache")
    assert code == 2, err
    assert words in err and "pickle" not in err, err


def test_an_inputs_path_that_is_not_a_regular_file_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = kinac_here(capsys, "run", str(MLP), "mlp", "--inputs", str(tmp_path))
    assert code == 2 and "not a regular file" in err and "no such" not in err, err


# ---------------------------------------------------------------- the build server's files


def _dead_socket(path: Path) -> None:
    """A socket file nobody listens at: what a server killed with SIGKILL (or a reboot) leaves."""
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.close()


def test_a_dead_servers_socket_is_removed_once_not_noted_on_every_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """After `kill -9` of `kinac serve` (or a reboot: the socket lives in the cache directory),
    every later build printed 'nothing listens at ... (a stale socket)', forever."""
    import os

    from kinac.server import client
    from kinac.server.address import socket_path

    ws = mlp_copy(tmp_path / "ws").resolve()
    path = socket_path(ws, ws / ".kinac-cache", os.environ)
    path.parent.mkdir(parents=True, exist_ok=True)
    _dead_socket(path)
    assert client.forward(["build", str(ws)]) is None
    err = capsys.readouterr().err
    assert "stale socket" in err and "removed" in err, err
    assert not path.exists()
    assert client.forward(["build", str(ws)]) is None
    assert capsys.readouterr().err == ""  # the next build: nothing to say


def test_a_file_that_is_not_a_socket_is_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kinac.server import client

    path = tmp_path / "s.sock"
    path.write_text("not ours to delete")
    assert client.talk(path, ["build", "."]) is None
    assert "nothing listens" in capsys.readouterr().err and path.read_text()


def test_a_server_listens_before_its_socket_appears(tmp_path: Path) -> None:
    """A client that finds the socket path may connect at once: bound but not yet listening
    was a refused connection, which a client now takes for a dead server and removes. The
    server binds a temporary name, listens, then renames it into place."""
    import socket

    from kinac.server import serve

    seen: list[bool] = []
    real_bind = socket.socket.bind

    class Probe(socket.socket):
        def bind(self, addr: object) -> None:
            real_bind(self, addr)  # type: ignore[arg-type]
            seen.append(srv.path.exists())

    srv = serve.Server(tmp_path, tmp_path / "cache")
    socket_class = serve.socket.socket
    serve.socket.socket = Probe  # type: ignore[misc]
    try:
        assert srv.bind()
    finally:
        serve.socket.socket = socket_class  # type: ignore[misc]
    try:
        assert seen == [False]  # not at its real name while only bound
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(str(srv.path))
        c.close()
        assert [p.name for p in srv.path.parent.iterdir()] == [srv.path.name]
    finally:
        srv.close()
    assert not srv.path.exists()


# ---------------------------------------------------------------- rendering source lines


def _check_text(tmp_path: Path, capsys: pytest.CaptureFixture[str], src: str) -> str:
    f = tmp_path / "s.kina"
    f.write_text(src, encoding="utf-8", newline="")
    code, out, err = kinac_here(capsys, "check", str(f), "--no-cache", "--color", "never")
    assert code == 1, out + err
    return out + err


def _caret_under(text: str, word: str) -> None:
    """The first snippet row shows ``word`` exactly above the first ``^`` row's carets."""
    rows = text.splitlines()
    i = next(i for i, r in enumerate(rows) if "|" in r and word in r)
    carets = rows[i + 1]
    assert carets.index("^") == rows[i].index(word), (rows[i], carets)
    assert carets.count("^") == len(word), carets


BODY = "(defn a [(x : (tensor f32 [N]))] -> (tensor f32 [N])\n"


def test_a_line_indented_with_tabs_keeps_its_carets_under_the_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The terminal expanded the tabs, the carets counted them as one column: `^^^^` landed
    ten columns left of `nope`."""
    text = _check_text(tmp_path, capsys, BODY + "\t\t(add x (nope x)))\n")
    assert "\t" not in text
    _caret_under(text, "nope")


@pytest.mark.parametrize("sep", ["\x0c", "\u2028", "\r", "\x1c", "\x85"])
def test_the_snippet_is_the_line_the_reader_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sep: str
) -> None:
    """The reader counts lines by `\\n`, `\\r\\n` and a lone `\\r` (as editors do); the
    renderer split with str.splitlines, which also splits at form feeds, U+2028 ...: the
    snippet showed the wrong line."""
    text = _check_text(tmp_path, capsys, f";; {sep} page\n" + BODY + "  (add x (nope x)))\n")
    assert (":4:" if sep == "\r" else ":3:") in text
    _caret_under(text, "nope")


@pytest.mark.parametrize("bad", ["\u202e", "\x1b[2J", "\u200b"])
def test_control_and_bidi_characters_are_shown_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str
) -> None:
    """A snippet echoed a right-to-left override or an escape sequence raw to the terminal
    (which reordered or cleared the screen)."""
    text = _check_text(tmp_path, capsys, BODY + f"  (add x (nope x))) ; {bad}\n")
    assert bad[0] not in text and "\\u{" in text
    _caret_under(text, "nope")


def test_a_very_long_line_is_shown_around_its_mark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One error on a 200,000-character line printed all of it (and a caret row as long)."""
    text = _check_text(
        tmp_path,
        capsys,
        BODY + "  (add " + "(neg " * 30 + "x" + ")" * 30 + " " * 200_000 + "(nope x)))\n",
    )
    assert len(text) < 4000, len(text)
    _caret_under(text, "nope")


def test_a_lone_combining_accent_in_a_name_is_shown_by_its_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`e` + U+0301 (an NFD é) said "`́` cannot appear in a name": an accent over a backquote."""
    text = _check_text(tmp_path, capsys, "(defn e\u0301 [(x : f32)] -> f32 x)\n")
    assert "`\\u{301}` cannot appear in a name" in text, text


@pytest.mark.parametrize(
    "toml",
    ["workspace = 3", '[[workspace]]\nname = "x"', 'workspace = "x"', "[workspace]\nname = 1e400"],
)
def test_a_workspace_key_that_is_not_a_table_is_a_configuration_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], toml: str
) -> None:
    """`workspace = 3` was an internal error (AttributeError in the validation itself)."""
    ws = mlp_copy(tmp_path / "ws", toml=toml + "\n")
    code, _, err = kinac_here(capsys, "build", str(ws), "--no-server", "--no-cache")
    assert code == 2 and "kinac: error: kina.toml: workspace" in err, err


def test_kinac_server_auto_starts_one_server_for_a_burst_of_builds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four quick builds under KINAC_SERVER=auto started three servers: each build saw no
    socket yet (a server binds only after its warm-up build) and started another, and each
    extra one paid a whole cold build before finding the first one listening."""
    import os
    import subprocess

    from kinac.server import client

    started: list[list[str]] = []
    monkeypatch.setattr(subprocess, "Popen", lambda argv, **_: started.append(argv))
    monkeypatch.setenv("KINAC_SERVER", "auto")
    ws = mlp_copy(tmp_path / "ws").resolve()
    try:
        for _ in range(3):
            assert client.forward(["build", str(ws)]) is None
    finally:  # no server came to remove it (Popen is faked)
        from kinac.server.address import socket_path, starting_marker

        starting_marker(socket_path(ws, ws / ".kinac-cache", os.environ)).unlink(missing_ok=True)
    assert len(started) == 1, started


def test_kinac_serve_leaves_at_once_when_a_server_already_listens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second `kinac serve` warmed up (imports, a cold build of the workspace) before it
    found the socket taken."""
    import os
    import socket

    from kinac.server import serve
    from kinac.server.address import socket_path

    root = tmp_path.resolve()
    path = socket_path(root, root / "cache", os.environ)
    path.parent.mkdir(parents=True, exist_ok=True)
    live = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    live.bind(str(path))
    live.listen(1)

    def no_warm_up(*_: object) -> None:
        raise AssertionError("warmed up although a server listens")

    monkeypatch.setattr(serve, "prewarm", no_warm_up)
    monkeypatch.setattr(serve, "warm_workspace", no_warm_up)
    sess = SimpleNamespace(
        ws=SimpleNamespace(root=root, config_path=None, single_file=None),
        cache_dir=root / "cache",
        target_override=None,
    )
    try:
        assert serve.serve(sess, 60.0) == 0
    finally:
        live.close()
        path.unlink()
    assert "already listens" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "usage", "hint"),
    [
        (("run", "MLP", "mlp", "--sed", "3"), "usage: kinac run", "--seed"),
        (("build", "MLP", "--jsn"), "usage: kinac build", "--json"),
        (("buidl", "MLP"), "usage: kinac", "build"),
    ],
)
def test_a_mistyped_flag_is_reported_by_its_command_with_a_suggestion(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], usage: str, hint: str
) -> None:
    """`kinac run ws mlp --sed 3` printed the top-level usage (`kinac [-h] [--version] ...
    COMMAND`) and no hint: neither the command's flags nor the near miss."""
    argv = [str(MLP) if a == "MLP" else a for a in args]
    code, _, err = kinac_here(capsys, *argv)
    assert code == 2 and err.startswith(usage), err
    assert f"did you mean {hint}" in err, err


# ---------------------------------------------------------------- kinac cache, kinac check


@pytest.mark.parametrize("action", ["stats", "gc", "verify", "clear"])
def test_cache_commands_do_not_create_a_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], action: str
) -> None:
    """`kinac cache stats` in a directory never built created `.kinac-cache` there (with an
    empty index): a command that inspects must not leave anything behind."""
    import json

    ws = mlp_copy(tmp_path / "ws")
    code, out, err = kinac_here(capsys, "cache", action, str(ws))
    assert code == 0, err
    assert not (ws / ".kinac-cache").exists()
    assert "no cache" in err, err
    if action != "clear":  # the document a tool reads, in the shape of an empty cache's
        from kinac.rules.store import Store

        Store(tmp_path / "c").close()  # an existing, empty cache
        code, full, _ = kinac_here(
            capsys, "cache", action, str(ws), "--cache-dir", str(tmp_path / "c")
        )
        assert json.loads(out).keys() == json.loads(full).keys()


def test_check_without_a_path_checks_the_current_directory_as_build_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`kinac build` in a workspace builds `.`; `kinac check` said "the following arguments
    are required: path"."""
    ws = mlp_copy(tmp_path / "ws")
    monkeypatch.chdir(ws)
    code, _, err = kinac_here(capsys, "check", "--no-cache")
    assert code == 0 and "checked 1 file: no errors" in err, err


# ---------------------------------------------------------------- kinac launch


def test_sigterm_to_kinac_launch_stops_its_ranks(tmp_path: Path) -> None:
    """A scheduler's or CI's timeout sends SIGTERM: the launcher exited (143) and left every
    rank running (Ctrl-C did stop them)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    # one write(2) per rank: two ranks' prints on one pipe interleaved ("9453" "9454\n" "\n")
    rank = "import os, time; os.write(1, b'%d\\n' % os.getpid()); time.sleep(30)"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen(
        [sys.executable, "-m", "kinac", "launch", "-n", "2", "--", sys.executable, "-c", rank],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert p.stdout is not None
    pids = [int(p.stdout.readline()), int(p.stdout.readline())]
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=10) == 128 + signal.SIGTERM
    deadline = time.monotonic() + 5
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [q for q in alive if _running(q)]
        time.sleep(0.05)
    for q in alive:  # do not leave them behind even when the test fails
        os.kill(q, signal.SIGKILL)
    assert not alive, f"ranks {alive} outlived the launcher"


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie, reaped by nobody yet, is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_sigterm_to_kinac_watch_removes_its_server_socket(tmp_path: Path) -> None:
    """`kinac watch` is also a build server; killed by SIGTERM it left its socket behind, and
    the next build found a dead server there."""
    import os
    import signal
    import subprocess
    import sys

    from kinac.server.address import socket_path

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.kina").write_text("(defn f [(x : f32)] -> f32 x)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen(
        [sys.executable, "-m", "kinac", "watch", str(ws)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    assert p.stdout is not None
    seen = ""
    while "Watching" not in seen:  # the first build's line (a note may come first)
        line = p.stdout.readline()
        assert line, seen
        seen += line
    sock = socket_path(ws.resolve(), ws.resolve() / ".kinac-cache", os.environ)
    assert sock.exists()
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=10)
    assert not sock.exists()


def test_save_names_the_file_it_wrote_and_refuses_a_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--save /tmp` wrote /tmp.npz beside the directory, and `--save out.txt` wrote
    out.txt.npz, both silently (numpy adds `.npz`)."""
    import numpy as np

    (tmp_path / "d").mkdir()
    code, out, err = kinac_here(
        capsys, "run", str(MLP), "mlp", "--save", str(tmp_path / "d"), "--repeat", "1"
    )
    assert code == 2 and "is a directory" in err and "in  x" not in out, err
    assert not (tmp_path / "d.npz").exists()
    code, out, err = kinac_here(
        capsys, "run", str(MLP), "mlp", "--save", str(tmp_path / "out.txt"), "--repeat", "1"
    )
    saved = tmp_path / "out.txt.npz"
    assert code == 0 and f"saved 1 output to {saved}" in out, out
    assert list(np.load(saved).files) == ["arr_0"]


def test_a_file_name_with_control_characters_is_shown_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A source named `b<ESC>[31mad.kina` turned the rest of the terminal red: the `-->` line
    printed the name raw."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "b\x1b[31mad.kina").write_text(BODY + "  (add x (nope x)))\n")
    code, out, err = kinac_here(capsys, "check", str(ws), "--no-cache", "--color", "never")
    assert code == 1 and "\x1b" not in out + err, out + err
    assert "--> b\\u{1b}[31mad.kina:2:11" in out + err, out + err


def test_an_entry_whose_file_lacks_the_defn_names_that_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`file = "nosuch.kina"` said "no defn named `mlp` in the workspace", which has one."""
    ws = mlp_copy(tmp_path / "ws", '\n[[entry]]\nname = "m2"\ndefn = "mlp"\nfile = "nosuch.kina"\n')
    code, out, err = kinac_here(capsys, "build", str(ws), "--no-server", "--no-cache")
    assert code == 1, err
    assert "entry `m2`: no defn named `mlp` in `nosuch.kina`" in out + err, out + err


def test_a_toml_syntax_error_is_said_once_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It read `kina.toml: (syntax): kina.toml is not valid TOML: ...`."""
    ws = mlp_copy(tmp_path / "ws", "junk = [\n")
    code, _, err = kinac_here(capsys, "build", str(ws), "--no-server", "--no-cache")
    assert code == 2, err
    assert err.startswith("kinac: error: kina.toml: not valid TOML: "), err
    assert "(syntax)" not in err and err.count("kina.toml") == 1, err


@pytest.mark.parametrize("kind", ["directory", "dangling link", "link loop"])
def test_a_kina_toml_that_is_not_a_readable_file_is_a_configuration_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """A `kina.toml` that is a directory or a broken link was taken for no kina.toml at all:
    "built 1 file, 0 artifacts: no errors" (docs/language.md: never "no kina.toml")."""
    import os

    from kinac.server.address import locate_root
    from kinac.session import locate

    ws = mlp_copy(tmp_path / "ws")
    cfg = ws / "kina.toml"
    cfg.unlink()
    if kind == "directory":
        cfg.mkdir()
    else:
        os.symlink("nosuch.toml" if kind == "dangling link" else "kina.toml", cfg)
    code, _, err = kinac_here(capsys, "build", str(ws), "--no-server", "--no-cache")
    assert code == 2 and "kinac: error: kina.toml: " in err, err
    found = locate(ws)
    assert locate_root(str(ws)) == (found.root, found.config_path)
    assert locate_root(str(ws / "mlp.kina")) == (found.root, found.config_path)


@pytest.mark.parametrize(("name", "code"), [("pipe.kina", 1), ("kina.toml", 2)])
def test_a_fifo_in_the_workspace_is_reported_not_waited_on(
    tmp_path: Path, name: str, code: int
) -> None:
    """A named pipe among the sources (or as kina.toml) hung `kinac build` forever, reading
    it (a symlink to /dev/zero would read without end): only regular files are read (check
    reads what build reads)."""
    import os
    import subprocess
    import sys

    ws = mlp_copy(tmp_path / "ws")
    (ws / name).unlink(missing_ok=True)
    os.mkfifo(ws / name)
    # through the client (which looks for a server, reading kina.toml) and the local build
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KINAC_SERVER": ""}
    p = subprocess.run(
        [sys.executable, "-m", "kinac", "check", str(ws)],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )
    assert p.returncode == code, p.stderr
    assert "not a regular file" in p.stdout + p.stderr, p.stdout + p.stderr


@pytest.mark.parametrize("argv", [["watch", "."], ["run", ".", "e"], []])
def test_a_server_runs_only_what_a_client_forwards(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """The server ran any argv it was sent: `watch` or `serve` would hold its one build lock
    forever (every later client queued behind it), `run` executed code in the resident
    process. Only what kinac.server.address.read_argv forwards (build, check) is served."""
    import threading

    from kinac.server import client
    from kinac.server.serve import Server

    server = Server(tmp_path, tmp_path / "cache", idle_s=0.5)
    assert server.bind()
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        assert client.talk(server.path, argv) is None
        assert "refused (not a command a client forwards" in capsys.readouterr().err
    finally:
        server.stop.set()
        t.join(10)


def test_watch_stops_when_its_workspace_is_deleted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`rm -rf ws` under `kinac watch ws` printed one "cannot read kina.toml" and then
    watched nothing, silently, for ever."""
    import threading
    import time

    from kinac.session import Session
    from kinac.watch import watch

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.kina").write_text("(defn f [(x : f32)] -> f32 x)\n")
    (ws / "kina.toml").write_text('[workspace]\nname = "w"\n')
    sess = Session(ws, no_cache=True)
    stop = threading.Event()
    codes: list[int] = []
    t = threading.Thread(target=lambda: codes.append(watch(sess, stop)), daemon=True)
    t.start()
    deadline = time.monotonic() + 20
    while "Watching" not in capsys.readouterr().out and time.monotonic() < deadline:
        time.sleep(0.05)
    shutil.rmtree(ws)
    t.join(10)
    stop.set()
    assert codes == [2], codes
    assert "workspace" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("entry", "key", "words"),
    [
        ('name = "m2"\ndefn = ""', "entry[1].defn", "must not be empty"),  # ran `m2`'s defn
        ('name = "a\\nb"\ndefn = "mlp"', "entry[1].name", "printable"),  # split report lines
    ],
)
def test_empty_or_unprintable_entry_names_are_configuration_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], entry: str, key: str, words: str
) -> None:
    ws = mlp_copy(tmp_path / "ws", f"\n[[entry]]\n{entry}\n")
    code, _, err = kinac_here(capsys, "build", str(ws), "--no-server", "--no-cache")
    assert code == 2 and f"kinac: error: kina.toml: {key}: " in err and words in err, err


@pytest.mark.parametrize("suffix", [".npz", ".npy"])
def test_an_object_array_in_inputs_is_refused_without_pickle_advice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    """numpy's message "Object arrays cannot be loaded when allow_pickle=False" reached the
    user, as if passing allow_pickle were the fix."""
    import numpy as np

    f = tmp_path / f"obj{suffix}"
    obj = np.array([1, "a", None], dtype=object)
    if suffix == ".npz":
        np.savez(f, x=obj)
    else:
        np.save(f, obj, allow_pickle=True)
    src = tmp_path / "f.kina"
    src.write_text("(defn f [(x : (tensor f32 [N]))] -> (tensor f32 [N]) (neg x))\n")
    code, _, err = kinac_here(capsys, "run", str(src), "f", "--inputs", str(f), "--no-cache")
    assert code == 2 and "allow_pickle" not in err and "object" in err, err
