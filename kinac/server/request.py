"""One request to the build server: whether it can be served, and the process state (cwd,
environment, terminal, streams) it runs in.

Split from :mod:`kinac.server.serve` (the socket, the sessions and their lifetime) because a
request is checked and applied as a whole here: everything :func:`refusal` accepts,
:func:`request_context` can apply (before, a forwarded variable holding a NUL was accepted and
then refused by ``os.environ`` inside the request's thread: a traceback in the server's log
and a client cut off mid-request).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from typing import Any

from kinac.server.address import PROTOCOL, REQUEST_ENV, read_argv

ENV_KEYS = (*REQUEST_ENV, "COLUMNS", "LINES", "TERM")


def refusal(req: dict[str, Any] | None, version: str) -> str | None:
    """Why the server cannot serve ``req`` (sent to the client, which then builds locally),
    or None."""
    if req is None or req.get("kinac_server") != PROTOCOL:
        return f"protocol {req.get('kinac_server') if req else None!r}, server speaks {PROTOCOL}"
    if req.get("version") != version:
        return "another kinac version (this server is stale)"
    argv, cwd, env, tty = req.get("argv"), req.get("cwd"), req.get("env"), req.get("tty")
    if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
        return "bad argv"
    if read_argv(argv) is None:  # `watch`/`serve` would hold the build lock for ever
        return "not a command a client forwards (build and check are)"
    if not isinstance(cwd, str) or "\0" in cwd or not os.path.isdir(cwd):
        return "bad cwd"
    if not (
        isinstance(env, dict) and all(isinstance(v, str) and "\0" not in v for v in env.values())
    ):
        return "bad env"  # a variable holding a NUL: no process environment can
    if not (isinstance(tty, list) and len(tty) == 2):
        return "bad tty"
    return None


class Stream(io.TextIOBase):
    """A request's stdout or stderr: each write becomes a frame (the client's ``isatty``)."""

    def __init__(self, send: Any, tag: str, tty: bool) -> None:
        self._send, self._tag, self._tty = send, tag, tty

    def write(self, s: str) -> int:
        if s:
            self._send({self._tag: s})
        return len(s)

    def isatty(self) -> bool:
        return self._tty

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"


@contextlib.contextmanager
def request_context(req: dict[str, Any], out: Any, err: Any) -> Iterator[None]:
    """The client's cwd, environment, terminal size and streams, for one request."""
    saved_env = {k: os.environ.get(k) for k in ENV_KEYS}
    saved_cwd = os.getcwd()
    saved_streams = sys.stdout, sys.stderr
    env: dict[str, str] = req["env"]
    size = req.get("size")
    try:
        for k in ENV_KEYS:
            os.environ.pop(k, None)
            if k in env:
                os.environ[k] = env[k]
        if isinstance(size, list) and len(size) == 2 and all(isinstance(v, int) for v in size):
            os.environ.setdefault("COLUMNS", str(size[0]))
            os.environ.setdefault("LINES", str(size[1]))
        os.chdir(req["cwd"])
        sys.stdout, sys.stderr = out, err
        yield
    finally:
        sys.stdout, sys.stderr = saved_streams
        os.chdir(saved_cwd)
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
