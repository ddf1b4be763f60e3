"""The build server (``kinac serve``) and its forwarding client, end to end.

One server process serves a two-layer scaling model (``benches/scaling.py``); a twin workspace
and cache in the same state are built by fresh ``kinac build`` processes with the server off,
so every forwarded request is compared with the local build of the same state: stdout and
stderr byte for byte (the elapsed-time figures aside, which differ between any two builds),
exit codes, and the queries an edit re-ran (exactly the changed kernel, as
``tests/test_kernels_incremental.py`` names them). The client's robustness cases (a stale
socket, a protocol error, a silent or dying server, a version mismatch, idle exit) run against
in-process fakes: fast, and no traceback or hang in any of them.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kinac.server import client
from kinac.server.address import (
    cache_dir_of,
    locate_root,
    read_argv,
    socket_path,
    version_fingerprint,
)
from kinac.server.serve import Server

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benches"))
import scaling  # noqa: E402

LAYERS = 2
SERVED_VERSION: list[str] = []  # the server's compiler fingerprint
KERNELS = ("host_kernel_llvm", "host_kernel_object")
TIMEOUT = 240


def kinac(
    cwd: Path, *args: str, env: dict[str, str] | None = None, flags: tuple[str, ...] = ()
) -> Any:
    """``python [flags] -m kinac ARGS`` in ``cwd`` (the forwarding client, or a local build)."""
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, *flags, "-m", "kinac", *args],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def local(cwd: Path, *args: str) -> Any:
    return kinac(cwd, *args, env={"KINAC_SERVER": "0"})


STATS = ("queries_executed", "queries_reused", "executed", "seconds", "why")


def same_text(s: str) -> str:
    """A build's output without what describes the process rather than the build: the time,
    and how many queries it ran or reused (two local builds of the same state differ there
    too: they depend on what a process holds in memory and on hash order)."""
    if s.startswith("{"):
        import json

        doc = json.loads(s)
        return json.dumps({k: v for k, v in doc.items() if k not in STATS}, indent=1)
    return re.sub(r"\(\d+ quer(y|ies) run, \d+ reused, \d+ ms\)", "(STATS)", s)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """(served workspace, twin workspace): the same model and the same cache state; a server
    (``kinac serve``) for the first."""
    tmp = tmp_path_factory.mktemp("server")
    ws = scaling.make_workspace(tmp, LAYERS)
    done = local(ws, "build", ".")
    assert done.returncode == 0, done.stderr
    twin = tmp / "twin"
    shutil.copytree(ws, twin)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KINAC_SERVER_CPU_LOG": str(tmp / "cpu.log")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kinac", "serve", str(ws), "--idle-timeout", "300"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    SERVED_VERSION[:] = [version_fingerprint(fresh=True)]
    path = socket_path(ws.resolve(), ws.resolve() / ".kinac-cache", env)
    deadline = time.monotonic() + TIMEOUT
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.1)
    yield ws, twin
    proc.terminate()
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err and not path.exists()


def both(served: Any, *args: str) -> tuple[Any, Any]:
    """The same command forwarded (served workspace) and local (twin): (forwarded, local)."""
    ws, twin = served
    fwd = forwarded(ws, *args)
    return fwd, local(twin, *args)


def forwarded(ws: Path, *args: str, flags: tuple[str, ...] = ()) -> Any:
    """A build forwarded to the server (asserted: it imported no kinac.session)."""
    done = kinac(ws, *args, flags=("-X", "importtime", *flags))
    imported = _imported(done.stderr)
    if "kinac.session" in imported and version_fingerprint(fresh=True) != SERVED_VERSION[0]:
        pytest.skip("kinac's sources changed while the test ran: the server is stale by design")
    assert "kinac.session" not in imported, done.stderr[-2000:]
    done.stderr = "".join(
        line
        for line in done.stderr.splitlines(keepends=True)
        if not line.startswith("import time:")
    )
    return done


def assert_same(fwd: Any, loc: Any) -> None:
    assert fwd.returncode == loc.returncode, (fwd.stderr, loc.stderr)
    assert same_text(fwd.stdout) == same_text(loc.stdout)
    assert same_text(fwd.stderr) == same_text(loc.stderr)


def test_forwarded_output_is_the_local_builds_and_edits_are_seen(served: Any) -> None:
    ws, twin = served
    for args in (
        ("build", ".", "--json"),
        ("build", "--target", "bogus"),  # argparse's usage error, from the server's parser
    ):
        assert_same(*both(served, *args))
    # an edit between requests is seen (the engine re-reads its inputs per request) ...
    bad = scaling.model_source(LAYERS, edited=False).replace(
        "-> (tensor T [B S D])", "-> (tensor T [B D])"
    )
    for w in (ws, twin):
        (w / "model.kina").write_text(bad)
    fwd, loc = both(served, "build", ".", "--color", "always")
    assert fwd.returncode == 1 and "error" in fwd.stderr
    assert_same(fwd, loc)
    assert_same(*both(served, "check", "model.kina", "--format", "json"))
    # ... and so is undoing it
    for w in (ws, twin):
        (w / "model.kina").write_text(scaling.model_source(LAYERS, edited=False))
    fwd, loc = both(served, "build", ".")
    assert fwd.returncode == 0
    assert_same(fwd, loc)


def test_a_forwarded_edit_recompiles_exactly_the_changed_kernel(served: Any) -> None:
    """The one-layer edit of ``benches/scaling.py``, forwarded: the queries it re-ran are the
    local build's of the same edit (one piece re-fused, no call re-specialised, only the new
    kernels lowered and compiled), and so is the whole JSON report."""
    import json

    ws, twin = served
    log = ws.parent / "cpu.log"  # KINAC_SERVER_CPU_LOG: the start, then a line per request
    logged = len(log.read_text().split())
    for w in (ws, twin):
        (w / "model.kina").write_text(scaling.model_source(LAYERS, edited=True))
    fwd, loc = both(served, "build", ".", "--json")
    assert_same(fwd, loc)
    ran, ran_here = (
        [
            (e["query"], json.dumps(e["key"], sort_keys=True))
            for e in json.loads(d.stdout)["executed"]
        ]
        for d in (fwd, loc)
    )
    names = [q for q, _ in ran]
    assert names.count("host_piece") == 1 and "specialise_call" not in names
    kernels = {k for q, k in ran if q == "host_kernel_object"}
    assert kernels and kernels == {k for q, k in ran if q == "host_kernel_llvm"}
    lowering = ("host_piece", "host_piece_object", *KERNELS, "lowered", "object_code")
    assert sorted(r for r in ran if r[0] in lowering) == sorted(
        r for r in ran_here if r[0] in lowering
    )
    # the no-op after it runs nothing, forwarded or not
    fwd, loc = both(served, "build", ".", "--json")
    assert_same(fwd, loc)
    assert json.loads(fwd.stdout)["queries_executed"] == 0
    deadline = time.monotonic() + TIMEOUT
    while len(cpu := [float(x) for x in log.read_text().split()]) < logged + 2:
        assert time.monotonic() < deadline, "the server logged no CPU for a request"
        time.sleep(0.05)
    assert logged >= 1 and cpu == sorted(cpu) and cpu[logged] > cpu[logged - 1]


def _imported(stderr: str) -> set[str]:
    return {
        line.rsplit("|", 1)[-1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:")
    }


def test_the_client_imports_almost_nothing_and_opting_out_builds_here(served: Any) -> None:
    ws, _ = served
    heavy = {
        "argparse",
        "pydantic",
        "rich",
        "kinac.cli",
        "kinac.cli_parser",
        "kinac.session",
        "kinac.pipeline",
        # what a client that starts in ~the interpreter's own time does without: socket.py's
        # selectors and array, hashlib's OpenSSL, a TOML parser for a kina.toml that sets no
        # cache_dir (docs/incremental.md, "Build server")
        "socket",
        "_hashlib",
        "tomllib",
    }
    fwd = kinac(ws, "build", ".", flags=("-X", "importtime"))
    if "kinac.session" in _imported(fwd.stderr):
        forwarded(ws, "build", ".")  # skips if kinac changed meanwhile, else fails
    assert fwd.returncode == 0 and "built 4 files" in fwd.stderr
    assert not heavy & _imported(fwd.stderr)
    for done in (
        kinac(ws, "build", ".", "--no-server", flags=("-X", "importtime")),
        kinac(ws, "build", ".", env={"KINAC_SERVER": "0"}, flags=("-X", "importtime")),
    ):
        assert done.returncode == 0 and {"kinac.session", "kinac.cli"} <= _imported(done.stderr)


def test_concurrent_clients_are_served_one_after_the_other(served: Any) -> None:
    ws, _ = served
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "kinac", "build", ".", "--json"],
            cwd=ws,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=TIMEOUT) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    assert len({same_text(o) for o, _ in outs}) == 1 and not any(e for _, e in outs)


# ---------------------------------------------------------------------- the client, in process


def test_the_client_reads_what_it_may_forward(tmp_path: Path) -> None:
    from kinac.session import choose_cache_dir, locate

    assert read_argv(["build"]).path == "."  # type: ignore[union-attr]
    assert read_argv(["check"]).path == "."  # type: ignore[union-attr]
    r = read_argv(["--debug", "build", "ws", "--json", "--target=cuda", "--cache-dir", "c"])
    assert r is not None and (r.path, r.cache_dir, r.no_server) == ("ws", "c", False)
    assert read_argv(["check", "m.kina", "--no-server"]).no_server  # type: ignore[union-attr]
    for refused in (
        ["run", "ws", "e"],
        ["build", "--help"],
        ["build", "--no-cache"],
        ["build", "a", "b"],
        ["build", "--cach", "x"],
        ["build", "--target"],
        [],
    ):
        assert read_argv(refused) is None, refused
    # the client's reading of the workspace and cache is the session's
    (tmp_path / "ws" / "sub").mkdir(parents=True)
    (tmp_path / "ws" / "kina.toml").write_text('[workspace]\ncache_dir = "../c"\n')
    (tmp_path / "ws" / "sub" / "a.kina").write_text("(module a)\n")
    (tmp_path / "loose.kina").write_text("(module loose)\n")
    for text in ('[workspace]\nname = "w"\n', '[workspace]\nname = "w"  # no cache_dir\n', "[w"):
        (tmp_path / f"ws{len(text)}").mkdir()  # ws23, ws39, ws2
        (tmp_path / f"ws{len(text)}" / "kina.toml").write_text(text)
    for p in (
        tmp_path / "ws23",
        tmp_path / "ws39",
        tmp_path / "ws2",
        tmp_path / "ws",
        tmp_path / "ws" / "sub" / "a.kina",
        tmp_path / "loose.kina",
        tmp_path / "ws" / "kina.toml",
    ):
        ws = locate(p)
        found = locate_root(str(p))
        assert found == (ws.root, ws.config_path)
        for cli_dir in (None, str(tmp_path / "x")):
            assert cache_dir_of(found[0], found[1], cli_dir, {}) == choose_cache_dir(ws, cli_dir)
    assert locate_root(str(tmp_path / "missing")) is None


def _fake_server(path: Path, behave: Any) -> threading.Thread:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen(1)

    def run() -> None:
        conn, _ = sock.accept()
        try:
            conn.recv(65536)
            behave(conn)
        finally:
            conn.close()
            sock.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize(
    ("behave", "note"),
    [
        (lambda c: c.sendall(b"garbage\n"), "ProtocolError"),
        (lambda c: c.sendall(b'{"accepted": true}\n{"o": "half'), "closed mid-frame"),
        (lambda c: c.sendall(b'{"accepted": true}\n'), "stopped mid-request"),
        (
            lambda c: c.sendall(b'{"refused": "another kinac version"}\n'),
            "refused (another kinac version)",
        ),
        (lambda c: time.sleep(1.0), "timed out"),
    ],
)
def test_a_bad_server_is_a_note_and_a_local_build(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    behave: Any,
    note: str,
) -> None:
    monkeypatch.setattr(client, "CONNECT_TIMEOUT", 0.3)
    path = tmp_path / "s.sock"
    t = _fake_server(path, behave)
    assert client.talk(path, ["build", "."]) is None
    t.join(5)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("kinac: note: build server: ") and note in err, (
        err
    )


def test_a_stale_socket_is_a_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.close()  # its server died: the file stays, nobody listens
    assert client.talk(path, ["build", "."]) is None
    assert "a stale socket" in capsys.readouterr().err


def test_a_server_refuses_another_version_and_exits_when_idle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = Server(tmp_path, tmp_path / "cache", idle_s=0.5)
    assert server.bind()
    assert not Server(tmp_path, tmp_path / "cache").bind()  # one server per socket
    server.version = "another"
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    assert client.talk(server.path, ["build", str(tmp_path)]) is None
    assert "refused (another kinac version" in capsys.readouterr().err
    t.join(10)
    assert not t.is_alive() and not server.path.exists()  # idle: gone, socket removed


def test_kinac_watch_serves_while_it_watches(tmp_path: Path) -> None:
    """``kinac watch`` is a server too: another process's ``kinac check`` is answered by the
    watching session; the socket goes when the watch stops."""
    from kinac.session import Session
    from kinac.watch import watch

    if not SERVED_VERSION:
        SERVED_VERSION[:] = [version_fingerprint(fresh=True)]
    (tmp_path / "a.kina").write_text(
        "(module a)\n\n(defn twice [(x : (tensor f32 [N]))] -> (tensor f32 [N])\n  (add x x))\n"
    )
    sess = Session(tmp_path)
    path = socket_path(tmp_path.resolve(), sess.cache_dir, os.environ)
    stop = threading.Event()
    t = threading.Thread(target=watch, args=(sess, stop), kwargs={"serve": True}, daemon=True)
    t.start()
    deadline = time.monotonic() + 60
    while not path.exists():
        assert time.monotonic() < deadline and t.is_alive(), "watch did not start serving"
        time.sleep(0.05)
    done = forwarded(tmp_path, "check", "a.kina")
    assert done.returncode == 0 and "checked 1 file: no errors" in done.stderr, done.stderr
    stop.set()
    t.join(30)
    assert not t.is_alive() and not path.exists()


def test_kinac_server_auto_starts_one_for_the_next_build(tmp_path: Path) -> None:
    """``KINAC_SERVER=auto``: a build that finds no server builds here and starts one; the next
    build is forwarded. The server goes when its socket file is removed."""
    if not SERVED_VERSION:
        SERVED_VERSION[:] = [version_fingerprint(fresh=True)]
    (tmp_path / "a.kina").write_text(
        "(module a)\n\n(defn twice [(x : (tensor f32 [N]))] -> (tensor f32 [N])\n  (add x x))\n"
    )
    path = socket_path(tmp_path.resolve(), tmp_path.resolve() / ".kinac-cache", os.environ)
    first = kinac(tmp_path, "check", "a.kina", env={"KINAC_SERVER": "auto"})
    assert first.returncode == 0 and first.stderr == "checked 1 file: no errors\n"
    deadline = time.monotonic() + 120
    while not path.exists():
        assert time.monotonic() < deadline, (tmp_path / ".kinac-cache" / "server.log").read_text()
        time.sleep(0.1)
    done = forwarded(tmp_path, "check", "a.kina")
    assert done.returncode == 0 and done.stderr == first.stderr
    path.unlink()  # as `kinac cache clear` might: the server notices and exits
    log = tmp_path / ".kinac-cache" / "server.log"
    deadline = time.monotonic() + 30
    while "kinac serve: stopped" not in log.read_text():
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)


def test_the_start_up_warm_build_leaves_the_cache_alone(tmp_path: Path) -> None:
    """``kinac serve`` builds its workspace once at start to warm the process (not the cache):
    the build succeeds, and no cache directory is created or written."""
    from kinac.server.warm import warm_workspace
    from kinac.session import Session

    (tmp_path / "m.kina").write_text(
        "(module m)\n(defn f [(x : (tensor f32 [4]))] -> (tensor f32 [4]) (mul x x))\n"
    )
    (tmp_path / "kina.toml").write_text(
        '[workspace]\nname = "m"\n\n[[entry]]\nname = "f"\ndefn = "f"\n'
    )
    sess = Session(tmp_path / "m.kina", no_cache=True)
    assert warm_workspace(sess)
    assert not (tmp_path / ".kinac-cache").exists()
    (tmp_path / "m.kina").write_text("(module m)\n(defn f [] -> i32 (undefined-name))\n")
    assert not warm_workspace(sess)  # a failing build is the real builds' to report


def test_the_served_session_takes_the_start_up_builds_values(tmp_path: Path) -> None:
    """The start-up build's values are the served session's, by fingerprint: an edit that
    re-runs one defn's check and the entry reads every unchanged value it needs (signatures,
    specialised calls, pieces, kernels) from them, the cache's copies neither read nor
    decoded, and builds what a session without them builds."""
    from kinac.server.warm import warm_workspace
    from kinac.session import Session

    ws = scaling.make_workspace(tmp_path, 2)
    cache = str(tmp_path / "cache")
    first = Session(ws, cache_dir=cache)
    assert first.build().error_count == 0
    first.close()
    sess = Session(ws, cache_dir=cache)
    assert warm_workspace(sess)
    read: list[str] = []
    assert sess.store is not None
    load = sess.store.load_value

    def counted(fp: str) -> Any:
        read.append(fp)
        return load(fp)

    sess.store.load_value = counted  # type: ignore[method-assign]
    (ws / "model.kina").write_text(scaling.model_source(2, edited=True))
    report = sess.build()
    assert report.error_count == 0 and read == []
    assert sess.db.events.executed_names("codegen")  # the edit built: the changed kernel
    fresh = Session(ws, cache_dir=str(tmp_path / "other"))
    assert fresh.build().artifacts == report.artifacts
