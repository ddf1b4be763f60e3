"""``kinac serve``: a resident build server for one workspace and cache.

Holds a :class:`kinac.session.Session` per (workspace path, cache, target), and with it the
engine's memo tables and every import (pre-imported at start: the lowering, LLVM and PTX
modules an edit needs). Each request runs the ordinary command line (:func:`kinac.cli.main`)
with its argv, cwd and environment, stdout and stderr streamed back as frames, so its output is
the local build's byte for byte. Before each request every input is re-read
(``Database.invalidate()``): a file edited between requests is seen, and the engine's
red-green verification re-runs exactly what the change reaches. One build at a time (a lock:
concurrent clients queue, told so once a second); the server exits after ``idle`` seconds
without a request, on SIGTERM or Ctrl-C, or when its socket file is removed (``kinac cache
clear``).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from kinac.server.address import (
    socket_path,
    starting_marker,
    version_fingerprint,
)
from kinac.server.protocol import Channel, ProtocolError
from kinac.server.request import Stream, refusal, request_context
from kinac.server.warm import prewarm, warm_workspace  # the names serve() calls (tests patch them)

IDLE_S = 15 * 60.0
BEAT_S = 1.0
_TMP_SEQ = itertools.count()  # temporary socket names of this process (Server.bind)


class Server:
    """One listening socket; requests served one at a time under :attr:`lock`."""

    def __init__(self, root: Path, cache_dir: Path, idle_s: float = IDLE_S) -> None:
        self.root, self.cache_dir, self.idle_s = root, cache_dir, idle_s
        self.path = socket_path(root, cache_dir, os.environ)
        self.version = version_fingerprint()
        self.lock = threading.Lock()  # one build at a time; `kinac watch` takes it too
        self.sessions: dict[tuple[str, ...], Any] = {}
        self.stop = threading.Event()
        self.last = time.monotonic()
        self.active = 0
        self._sock: socket.socket | None = None
        self._ino = -1
        self.bind_error: str | None = None  # why no socket could be made (see bind)
        # the process's CPU seconds after each request (and at start), one line each, for
        # benches/scaling.py: /proc's counters tick every 10 ms, a served edit is ~80 ms
        self.cpu_log = os.environ.get("KINAC_SERVER_CPU_LOG") or None

    # ------------------------------------------------------------------ lifecycle

    def live(self) -> bool:
        """Whether a server listens at :attr:`path` already (a refusing socket is removed)."""
        if not self.path.exists():
            return False
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        probe.settimeout(1.0)
        try:
            probe.connect(str(self.path))
            return True
        except OSError:
            with contextlib.suppress(OSError):  # (a directory there is no socket to remove)
                self.path.unlink(missing_ok=True)  # stale: its server died
            return False
        finally:
            probe.close()

    def bind(self) -> bool:
        """Listen at :attr:`path`; False when a live server already does, or when no socket
        can be made there (then :attr:`bind_error` says why: a read-only cache directory)."""
        # Listen under a temporary name, then link it into place: a client that finds the path
        # may connect at once, and a refused connection means a dead server whose socket the
        # client removes (kinac.server.client._remove_stale). The link fails if another
        # server's is there already. The temporary name is shorter than the real one, so it
        # fits wherever the real one does (address.SOCKET_MAX).
        tmp = self.path.with_name(f"s{os.getpid()}-{next(_TMP_SEQ)}.tmp")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            if self.live():
                sock.close()
                return False
            tmp.unlink(missing_ok=True)
            sock.bind(str(tmp))
            os.chmod(tmp, 0o600)
            sock.listen(16)
            os.link(tmp, self.path)
        except FileExistsError:
            sock.close()
            return False  # another server linked its socket first
        except OSError as e:
            sock.close()
            self.bind_error = e.strerror or str(e)
            return False
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
        sock.settimeout(0.5)
        self._sock, self._ino = sock, os.stat(self.path).st_ino
        return True

    def serve_forever(self, idle: bool = True) -> None:
        """Accept until stopped, idle (``idle``) or the socket file is gone."""
        try:
            while not self.stop.is_set():
                sock = self._sock
                if sock is None:
                    break
                try:
                    conn, _ = sock.accept()
                except TimeoutError:
                    if not self._still_ours() or (
                        idle and self.active == 0 and time.monotonic() - self.last > self.idle_s
                    ):
                        break
                    continue
                except OSError:
                    break  # closed by another thread (``kinac watch`` stopping)
                self.active += 1
                threading.Thread(target=self._handle, args=(conn,), daemon=True).start()
        finally:
            self.close()

    def close(self) -> None:
        self.stop.set()
        sock, self._sock = self._sock, None
        if sock is not None:
            if self._still_ours():
                self.path.unlink(missing_ok=True)
            sock.close()

    def _still_ours(self) -> bool:
        try:
            return os.stat(self.path).st_ino == self._ino
        except OSError:
            return False

    # ------------------------------------------------------------------ requests

    def _handle(self, conn: socket.socket) -> None:
        from kinac.compiler_gc import settle

        ch = Channel(conn)
        send_lock = threading.Lock()
        dead = threading.Event()

        def send(obj: dict[str, Any]) -> None:
            if dead.is_set():
                return
            with send_lock:
                try:
                    ch.send(obj)
                except OSError:
                    dead.set()  # the client left (Ctrl-C): the build still finishes and caches

        try:
            conn.settimeout(5.0)
            try:
                req = ch.recv()
            except (OSError, ProtocolError):
                return
            why = refusal(req, self.version)
            if why is not None:
                send({"refused": why})
                return
            assert req is not None
            send({"accepted": True})
            conn.settimeout(None)
            while not self.lock.acquire(timeout=BEAT_S):
                send({"wait": True})
            try:
                code = self._run(req, send, dead)
                send({"exit": code})
                settle()  # as `kinac watch` does between builds, after the client has its answer
                self.log_cpu()
            finally:
                self.lock.release()
        finally:
            self.last = time.monotonic()
            self.active -= 1
            conn.close()

    def log_cpu(self) -> None:
        """Append this process's CPU seconds to ``KINAC_SERVER_CPU_LOG`` (if set)."""
        if self.cpu_log is not None:
            with open(self.cpu_log, "a", encoding="utf-8") as f:
                f.write(f"{time.process_time():.6f}\n")

    def _run(self, req: dict[str, Any], send: Any, dead: threading.Event) -> int:
        """``kinac.cli.main(argv)`` as the client would have run it, output to the client."""
        from kinac import cli

        done = threading.Event()

        def beat() -> None:
            while not done.wait(BEAT_S):
                send({"beat": True})

        beater = threading.Thread(target=beat, daemon=True)
        beater.start()
        out, err = Stream(send, "o", bool(req["tty"][0])), Stream(send, "e", bool(req["tty"][1]))
        try:
            with request_context(req, out, err):
                cli.SESSION_HOOK = self.session_for
                outer = cli.OPEN_SESSIONS[:]  # `kinac watch`'s own: main closes what it lists
                cli.OPEN_SESSIONS.clear()
                try:
                    return int(cli.main(list(req["argv"])))
                except SystemExit as e:  # argparse's usage errors
                    return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
                finally:
                    cli.SESSION_HOOK = None
                    cli.OPEN_SESSIONS[:] = outer
        finally:
            done.set()
            beater.join()

    def session_for(self, args: Any) -> Any:
        """The resident session for these arguments, its inputs to be re-read (or None)."""
        if getattr(args, "no_cache", False):
            return None
        from kinac.session import Session, choose_cache_dir, locate

        ws = locate(args.path)
        cache = choose_cache_dir(ws, args.cache_dir)
        target = getattr(args, "target", None)
        key = (str(ws.root), str(ws.config_path), str(ws.single_file), str(cache), str(target))
        sess = self.sessions.get(key)
        if sess is None:
            sess = Session(args.path, cache_dir=args.cache_dir, target=target)
            self.sessions[key] = sess
        else:
            sess.db.events.clear()
            sess.db.invalidate()  # every input re-read: what changed since the last request
        return sess

    def adopt(self, sess: Any, target: str | None = None) -> None:
        """Serve ``sess`` (``kinac watch``'s) for requests naming its workspace and cache."""
        ws = sess.ws
        key = (str(ws.root), str(ws.config_path), str(ws.single_file), str(sess.cache_dir))
        self.sessions[(*key, str(target))] = sess


def _reuse_the_parser() -> None:
    """The command line's parser built once for every request (argparse's parsers keep no
    state between ``parse_args`` calls; building one is ~5 ms of each request)."""
    import functools

    from kinac import cli

    if not hasattr(cli.build_parser, "cache_info"):
        cli.build_parser = functools.lru_cache(maxsize=1)(cli.build_parser)  # type: ignore[assignment]


def serve(sess: Any, idle_s: float) -> int:
    """``kinac serve``: warm up, listen, serve until idle; exit code."""
    _reuse_the_parser()
    server = Server(sess.ws.root, sess.cache_dir, idle_s)
    marker = starting_marker(server.path)
    try:
        if server.live():  # before the warm-up: a second server would pay a cold build for nothing
            print(f"kinac serve: a server already listens at {server.path}", file=sys.stderr)
            return 0
        errors = sess.config_errors()
        if errors:  # serving would answer every build with them: say so once, and start nothing
            from kinac.errors import EXIT_USAGE

            for text in errors:
                print(f"kinac: error: {text}", file=sys.stderr)
            sess.close()
            return EXIT_USAGE
        server.adopt(sess, sess.target_override)
        prewarm()
        warm_workspace(sess)
        from kinac.compiler_gc import settle

        settle()
        bound = server.bind()
    finally:
        with contextlib.suppress(OSError):  # listening or not, it is no longer starting
            marker.unlink(missing_ok=True)
    if not bound and server.bind_error is not None:
        from kinac.errors import EXIT_USAGE

        print(
            f"kinac: error: kinac serve cannot listen at {server.path} ({server.bind_error})",
            file=sys.stderr,
        )
        sess.close()
        return EXIT_USAGE
    if not bound:
        print(f"kinac serve: a server already listens at {server.path}", file=sys.stderr)
        return 0
    server.log_cpu()
    signal.signal(signal.SIGTERM, lambda *_: server.stop.set())
    print(
        f"kinac serve: listening at {server.path} (workspace {server.root}, cache "
        f"{server.cache_dir}); exits after {idle_s:g} s idle",
        file=sys.stderr,
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
        sess.close()
    print("kinac serve: stopped", file=sys.stderr, flush=True)
    return 0


def serve_in_background(sess: Any) -> Server | None:
    """For ``kinac watch``: serve its session from a thread while it watches (None when another
    server already serves this workspace and cache)."""
    _reuse_the_parser()
    server = Server(sess.ws.root, sess.cache_dir)
    server.adopt(sess, sess.target_override)
    if not server.bind():
        return None
    threading.Thread(target=server.serve_forever, args=(False,), daemon=True).start()
    return server
