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
