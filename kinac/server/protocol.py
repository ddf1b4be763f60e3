"""The build server's wire format: one JSON object per line over a Unix socket (no pickle).

Client -> server, once: ``{"kinac_server": PROTOCOL, "version": FP, "argv": [...], "cwd": ...,
"env": {...}, "tty": [stdout, stderr], "size": [columns, lines]}``.
Server -> client: ``{"accepted": true}`` or ``{"refused": REASON}`` at once; then, in order,
``{"wait": true}`` (queued behind another client) and ``{"beat": true}`` (building) about once a
second, so a client can tell a busy server from a hung one; ``{"o": TEXT}`` / ``{"e": TEXT}``
for what the build wrote to stdout / stderr; ``{"exit": CODE}`` last.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the client uses ``_socket``'s sockets (the same methods), not ``socket``
    import socket

MAX_FRAME = 64 * 1024 * 1024  # a frame longer than this is a protocol error, not a wait


class ProtocolError(Exception):
    """The peer sent something that is not a frame of this protocol (or closed mid-frame)."""


class Channel:
    """Frames over one connected socket; ``recv`` honours the socket's timeout."""

    def __init__(self, sock: socket.socket | Any) -> None:
        self.sock = sock
        self._buf = bytearray()

    def send(self, obj: dict[str, Any]) -> None:
        self.sock.sendall(json.dumps(obj, separators=(",", ":")).encode() + b"\n")

    def recv(self) -> dict[str, Any] | None:
        """The next frame, or None at a clean end of stream (the peer closed between frames)."""
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line = bytes(self._buf[:nl])
                del self._buf[: nl + 1]
                try:
                    obj = json.loads(line)
                except (ValueError, UnicodeDecodeError) as e:
                    raise ProtocolError(f"not JSON: {e}") from None
                if not isinstance(obj, dict):
                    raise ProtocolError("a frame is not an object")
                return obj
            if len(self._buf) > MAX_FRAME:
                raise ProtocolError("frame too long")
            chunk = self.sock.recv(65536)
            if not chunk:
                if self._buf:
                    raise ProtocolError("connection closed mid-frame")
                return None
            self._buf += chunk
