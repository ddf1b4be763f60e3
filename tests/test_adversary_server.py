"""Adversarial requests to the build server (bug round 2026-12-02e): frames a foreign or
broken client can send over the socket, which the earlier server tests did not try. Every
one is refused with a reason (the client then builds locally), never a traceback in the
server, and the server goes on serving."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from kinac.server.address import PROTOCOL
from kinac.server.serve import Server


def _ask(path: Path, frame: dict[str, Any]) -> list[dict[str, Any]]:
    """Send one request frame; every frame of the answer."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(120)
    s.connect(str(path))
    s.sendall(json.dumps(frame).encode() + b"\n")
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    return [json.loads(line) for line in data.splitlines()]


@pytest.fixture
def server(tmp_path: Path) -> Any:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.kina").write_text("(module a)\n(defn f [(x : f32)] -> f32 (add x x))\n")
    srv = Server(ws, tmp_path / "cache")
    assert srv.bind()
    t = threading.Thread(target=srv.serve_forever, args=(False,), daemon=True)
    t.start()
    base = {
        "kinac_server": PROTOCOL,
        "version": srv.version,
        "argv": ["check", str(ws), "--cache-dir", str(tmp_path / "cache")],
        "cwd": str(tmp_path),
        "env": {},
        "tty": [False, False],
        "size": None,
    }
    yield srv, base
    srv.close()
    t.join(10)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"env": {"NO_COLOR": "1\x002"}}, "bad env"),  # os.environ refuses a NUL
        ({"cwd": "/tmp\x00"}, "bad cwd"),
    ],
)
def test_a_request_the_server_cannot_apply_is_refused(
    server: Any, change: dict[str, Any], why: str
) -> None:
    """Before: a NUL in a forwarded variable was accepted, then ``os.environ`` raised in the
    request's thread (a traceback in the server's log, the client's connection closed)."""
    srv, base = server
    unhandled: list[str] = []
    old_hook = threading.excepthook
    threading.excepthook = lambda a: unhandled.append(f"{a.exc_type.__name__}: {a.exc_value}")
    try:
        answer = _ask(srv.path, {**base, **change})
        served = _ask(srv.path, base)  # and the server goes on
    finally:
        threading.excepthook = old_hook
    assert answer == [{"refused": why}]
    assert unhandled == []
    assert served[0] == {"accepted": True} and served[-1] == {"exit": 0}


def test_cache_clear_stops_the_server_of_that_cache(tmp_path: Path) -> None:
    """``kinac cache clear`` is not forwarded; it deleted the index but left the server's
    socket, so the server went on serving from an index it held open but that no longer had
    a name: every build not forwarded to it (``kinac run``, ``kinac.compile``,
    ``--no-server``) was a cold one while it lived (up to 15 idle minutes, or for ever while
    used). The socket goes with the cache now, and the server, seeing it gone, stops."""
    import time

    from kinac.rules import cache_admin
    from kinac.rules.store import Store

    ws = tmp_path / "ws"
    ws.mkdir()
    srv = Server(ws, tmp_path / "cache")
    assert srv.bind()
    t = threading.Thread(target=srv.serve_forever, args=(False,), daemon=True)
    t.start()
    (tmp_path / "cache" / "notes.sock.txt").write_text("a user's file, not a socket")
    store = Store(tmp_path / "cache")
    store.save({})  # an index to clear
    cache_admin.clear(store)
    deadline = time.monotonic() + 10
    while t.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not t.is_alive() and not srv.path.exists()
    assert (tmp_path / "cache" / "notes.sock.txt").exists()


def test_kinac_serve_where_it_cannot_listen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``kinac serve`` on a cache directory where it cannot make its socket (a read-only
    mount, here a link refused as it is there): before, an internal error (the start marker's
    removal raised) or, past that, "a server already listens at ..." with exit 0, which was
    untrue. Now one error that says why, exit 2, and nothing left behind."""
    import os

    from kinac.errors import EXIT_USAGE
    from kinac.server import serve as serve_mod
    from kinac.server.address import starting_marker
    from kinac.session import Session

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.kina").write_text("(module a)\n(defn f [(x : f32)] -> f32 (add x x))\n")
    sess = Session(ws, cache_dir=str(tmp_path / "cache"))
    path = Server(sess.ws.root, sess.cache_dir).path
    starting_marker(path).mkdir(parents=True)  # removing it raises IsADirectoryError

    def refuse(src: object, dst: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(serve_mod, "prewarm", lambda: None)
    monkeypatch.setattr(serve_mod, "warm_workspace", lambda s: True)
    monkeypatch.setattr(os, "link", refuse)
    code = serve_mod.serve(sess, idle_s=0.1)
    err = capsys.readouterr().err
    assert code == EXIT_USAGE, err
    assert "cannot listen" in err and "Permission denied" in err and "already listens" not in err
    assert not path.exists() and not list(path.parent.glob("s*.tmp"))
