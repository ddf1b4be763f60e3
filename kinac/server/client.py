"""The ``kinac`` entry point: forward ``build`` / ``check`` to a live build server, else run
the command line in this process.

Runs before :mod:`kinac.cli` is imported (``python -X importtime -m kinac build``: this module
and :mod:`kinac.server.address` / :mod:`kinac.server.protocol`, the standard library's
``_socket`` (not ``socket``, which loads ``selectors`` and ``array`` too), ``json`` and
``_blake2`` (not ``hashlib``, which loads OpenSSL); no argparse, pydantic, rich or session),
because a forwarded build's whole point is not paying for imports. For the same reason a
forwarded build's process ends with ``os._exit`` once its output is flushed: the interpreter's
own tear-down (every module's dictionary freed) was ~7 ms of a ~70 ms client. Anything unexpected (a stale socket,
a server that died, refused the request, answered in another protocol or went silent) is one
``kinac: note:`` line and a local build: never a traceback, never a hang (every read has a
timeout, and a busy server sends a heartbeat about once a second).

``KINAC_SERVER``: unset (or anything else) forwards to a running server; ``0``/``off`` never
does (as ``--no-server``); ``auto`` also starts one in the background when none runs (this
build still runs here; the next ones are forwarded). docs/incremental.md, "Build server".
"""

from __future__ import annotations

import _socket
import contextlib
import os
import sys
from pathlib import Path
from typing import Any

from kinac.server.address import (
    PROTOCOL,
    REQUEST_ENV,
    cache_dir_of,
    locate_root,
    read_argv,
    socket_path,
    starting_marker,
    version_fingerprint,
)
from kinac.server.protocol import Channel, ProtocolError

CONNECT_TIMEOUT = 5.0  # connect, send the request, get accepted or refused (a loaded machine)
FRAME_TIMEOUT = 30.0  # silence between frames (the server beats every ~1 s) before giving up
OFF = ("0", "off", "no", "false")
STARTING_S = 120.0  # a server still not listening after this long is taken for dead


def main(argv: list[str] | None = None) -> int:
    """The console script and ``python -m kinac`` (``argv`` None: this process is the command,
    and a forwarded build ends it at once, see :func:`_exit_now`)."""
    args = sys.argv[1:] if argv is None else list(argv)
    code = forward(args)
    if code is not None:
        if argv is None:
            _exit_now(code)
        return code
    from kinac.cli import main as cli_main

    return cli_main(args)


def _exit_now(code: int) -> None:
    """End the process with ``code`` once stdout and stderr are flushed, skipping the
    interpreter's tear-down: a forwarded build holds nothing to release (its socket is closed,
    no ``atexit`` work is ours), and tearing down is ~10% of the client's CPU."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that left, a stream already closed
            pass
    os._exit(code)


def _note(text: str) -> None:
    print(f"kinac: note: build server: {text}; building in this process", file=sys.stderr)


def forward(argv: list[str]) -> int | None:
    """The exit code of ``argv`` run by a live server, or None: build here."""
    mode = os.environ.get("KINAC_SERVER", "").strip().lower()
    if mode in OFF:
        return None
    req = read_argv(argv)
    if req is None or req.no_server:
        return None
    found = locate_root(req.path)
    if found is None:
        return None
    root, config = found
    cache = cache_dir_of(root, config, req.cache_dir, os.environ)
    path = socket_path(root, cache, os.environ)
    if not path.exists():
        if mode == "auto":
            _start_server(root, cache, path)
        return None
    return talk(path, argv)


def _start_server(root: Path, cache: Path, path: Path) -> None:
    """``kinac serve`` for this workspace and cache, detached (``KINAC_SERVER=auto``), unless
    one is already starting: a server binds its socket only after its warm-up build, and every
    build in between would otherwise start one more (each paying a cold build)."""
    import subprocess

    try:
        cache.mkdir(parents=True, exist_ok=True)
        if not claim_start(path):
            return
        with open(cache / "server.log", "ab") as log:
            subprocess.Popen(
                [sys.executable, "-m", "kinac", "serve", str(root), "--cache-dir", str(cache)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                env={**os.environ, "KINAC_SERVER": "0"},
            )
    except OSError as e:
        _note(f"could not start one ({e})")


def _remove_stale(path: Path, before: os.stat_result) -> bool:
    """Remove the socket file at ``path`` that refused a connection: its server is gone (killed,
    or the machine rebooted; the file lives in the cache directory), and left in place it would
    cost every later build a note. Only a socket, and only the very file that refused (same
    inode): a server binds a temporary name and links it into place once it listens, so a
    socket at ``path`` that refuses is never one still starting."""
    import stat

    try:
        now = os.stat(path)
        if not stat.S_ISSOCK(now.st_mode) or (now.st_dev, now.st_ino) != (
            before.st_dev,
            before.st_ino,
        ):
            return False
        os.unlink(path)
    except OSError:
        return False
    return True


def claim_start(path: Path) -> bool:
    """Create the "a server is starting" marker beside ``path``; False when a fresh one
    (younger than :data:`STARTING_S`) is there. The server removes it once it listens or
    gives up; one left by a server that died while starting goes stale."""
    import time

    marker = starting_marker(path)
    for _ in range(2):
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            return True
        except FileExistsError:
            try:
                if time.time() - os.stat(marker).st_mtime < STARTING_S:
                    return False
                os.unlink(marker)  # stale: its server never got to listen
            except FileNotFoundError:
                continue  # it just listened, or gave up: try again
    return False


def request_of(argv: list[str]) -> dict[str, Any]:
    """Every explicit input of the build: argv, cwd, the environment it reads, the terminal."""
    env = {k: v for k, v in os.environ.items() if k.startswith("KINAC_") or k in REQUEST_ENV}
    for k in ("COLUMNS", "LINES", "TERM"):
        if k in os.environ:
            env[k] = os.environ[k]
    tty = [_isatty(sys.stdout), _isatty(sys.stderr)]
    size = None
    if tty[0] or tty[1]:
        try:
            cols, lines = os.get_terminal_size(sys.stdout.fileno() if tty[0] else 2)
            size = [cols, lines]
        except (OSError, ValueError):
            size = None
    return {
        "kinac_server": PROTOCOL,
        "version": version_fingerprint(),
        "argv": argv,
        "cwd": os.getcwd(),
        "env": env,
        "tty": tty,
        "size": size,
    }


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def talk(path: Path, argv: list[str]) -> int | None:
    """Send the request to the server at ``path`` and replay its output; None: build here."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    wrote = False
    try:
        sock.settimeout(CONNECT_TIMEOUT)
        try:
            before = os.stat(path)
        except OSError:
            return None  # gone since ``forward`` looked: no server, nothing to say
        try:
            sock.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            if _remove_stale(path, before):
                _note(f"removed a stale socket at {path} (its server is gone)")
            else:
                _note(f"nothing listens at {path} (a stale socket)")
            return None
        ch = Channel(sock)
        ch.send(request_of(argv))
        reply = ch.recv()
        if reply is None or reply.get("accepted") is not True:
            why = reply.get("refused") if isinstance(reply, dict) else None
            _note(f"refused ({why})" if isinstance(why, str) else "closed the connection")
            return None
        sock.settimeout(FRAME_TIMEOUT)
        while True:
            frame = ch.recv()
            if frame is None:
                _note("the server stopped mid-request" + (" (output above)" if wrote else ""))
                return None
            if "o" in frame:
                sys.stdout.write(str(frame["o"]))
                wrote = True
                if _isatty(sys.stdout):
                    sys.stdout.flush()
            elif "e" in frame:
                sys.stdout.flush() if _isatty(sys.stdout) else None
                sys.stderr.write(str(frame["e"]))
                sys.stderr.flush()
                wrote = True
            elif "exit" in frame:
                code = frame["exit"]
                if not isinstance(code, int) or isinstance(code, bool):
                    raise ProtocolError(f"bad exit code {code!r}")
                sys.stdout.flush()
                return code
            # "wait" and "beat" only prove the server is alive
    except KeyboardInterrupt:
        print("kinac: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # ``kinac build | head``: our reader left (kinac.cli does the same)
        if wrote:
            with contextlib.suppress(OSError):
                sys.stderr.close()
            return 0
        _note("its connection broke")
        return None
    except (OSError, ProtocolError, ValueError) as e:  # socket.timeout is an OSError
        what = "timed out" if isinstance(e, TimeoutError) else f"{type(e).__name__}: {e}"
        _note(f"{what}" + (" (output above is incomplete)" if wrote else ""))
        return None
    finally:
        sock.close()
