"""``kinac watch``: rebuild on every save, redraw the diagnostics.

Saves are coalesced by watchfiles (debounce 50 ms); each batch of changed paths invalidates
exactly the inputs that read them, and the rebuild re-runs only the queries those inputs reach.
A file that does not parse mid-edit is just another diagnostic. Ctrl-C exits cleanly.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

DEBOUNCE_MS = 50


def _rebuild(sess: Any) -> None:
    from kinac.cli_output import print_diags, summary

    sess.db.events.clear()
    t0 = time.perf_counter()
    errors = sess.config_errors()
    if errors:
        for e in errors:
            print(f"kinac: error: {e}", file=sys.stderr)
        return
    report = sess.build()
    ms = (time.perf_counter() - t0) * 1000
    diags = sess.diagnostics(report)
    if sys.stdout.isatty():
        print("\x1b[2J\x1b[H", end="")
    print_diags(sess, diags)
    ev = sess.db.events
    from kinac.cli_output import plural

    print(
        f"[{time.strftime('%H:%M:%S')}] {summary(diags)}: "
        f"{plural(len(ev.executed_events), 'query', 'queries')} run, "
        f"{len(ev.reused_events)} reused, {ms:.0f} ms. Watching {sess.ws.root} (Ctrl-C to stop)",
        flush=True,
    )
    from kinac.compiler_gc import settle

    settle()  # while waiting for the next save: the next build's collections stay small


def watch(sess: Any, stop_event: Any = None, serve: bool = False) -> int:
    """Build once, then rebuild on each change until Ctrl-C (or ``stop_event`` is set).

    With ``serve``, the session is also a build server while it watches (kinac.server: other
    processes' ``kinac build`` forward to it); its lock keeps their builds and ours apart."""
    from watchfiles import watch as watch_changes

    server = None
    if serve:
        from kinac.server.serve import serve_in_background

        server = serve_in_background(sess)
    lock: Any = server.lock if server is not None else contextlib.nullcontext()
    _stop_on_sigterm()
    try:
        with lock:
            _rebuild(sess)
        for changes in watch_changes(
            sess.ws.root,
            debounce=DEBOUNCE_MS,
            step=20,
            stop_event=stop_event,
            raise_interrupt=True,
            watch_filter=lambda _c, p: _relevant(sess, Path(p)),
        ):
            if not Path(sess.ws.root).is_dir():  # deleted or moved: nothing is left to watch
                return _gone(sess)
            with lock:
                sess.invalidate_paths([Path(p) for _, p in changes])
                _rebuild(sess)
    except KeyboardInterrupt:
        print("\nkinac watch: stopped", flush=True)
    except FileNotFoundError:  # watchfiles: the root went before its watcher started
        if Path(sess.ws.root).is_dir():
            raise
        return _gone(sess)
    finally:
        if server is not None:
            server.close()
        sess.close()
    return 0


def _gone(sess: Any) -> int:
    print(
        f"kinac: error: the workspace {sess.ws.root} is gone; kinac watch stopped",
        file=sys.stderr,
        flush=True,
    )
    return 2


def _stop_on_sigterm() -> None:
    """SIGTERM stops ``kinac watch`` as Ctrl-C does, so its server's socket is removed (killed,
    it stayed behind and the next build found a dead server there)."""
    import signal
    import threading

    def stop(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, stop)


def _relevant(sess: Any, path: Path) -> bool:
    """Whether a changed path is one a build reads: ``kina.toml``, a ``.kina`` file, or a
    folder (moved in, or one the last build read sources from: a folder's rename names the
    folder only), outside the workspace's hidden folders, ``__pycache__`` and the cache (as
    ``list_sources`` skips them). Only the components below the workspace root count: a
    workspace that itself lies under a hidden folder (``~/.work/ws``) is watched like any
    other."""
    from kinac.pipeline_support import SKIP_DIRS

    try:
        full = path.resolve()
        if full == sess.cache_dir or sess.cache_dir in full.parents:
            return False
    except OSError:
        return False
    rel = _below(path, Path(sess.ws.root))
    if rel is None:
        rel = _below(full, Path(sess.ws.root).resolve())
    if rel is None or not rel.parts:
        return False
    if any(part.startswith(".") or part == "__pycache__" for part in rel.parts[:-1]):
        return False
    if path.name.startswith(".") or path.name in SKIP_DIRS:  # an editor's .#a.kina lock too
        return False
    if path.suffix == ".kina" or path.name == "kina.toml":
        return True
    if path.is_dir():
        return True
    return not os.path.lexists(path) and bool(sess.reads_folder(rel.as_posix()))


def _below(path: Path, root: Path) -> Path | None:
    try:
        return path.relative_to(root)
    except ValueError:
        return None
