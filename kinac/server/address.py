"""Where a build server listens, and which requests a client may forward to it.

Imports only the standard library: the client runs this on every ``kinac build`` before
anything else, and a build that finds no server must not have paid for looking.

The socket is named from everything a resident process would otherwise get wrong: the
workspace root, the cache directory, the compiler's version fingerprint (the interpreter and
the size and mtime of every kinac source file: an edited or reinstalled kinac names a new
socket, so an old server is never asked) and the ``KINAC_*`` variables a process reads once
(``PROCESS_ENV``). The rest of the request's environment travels with each request.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

try:  # hashlib's own BLAKE2, without hashlib loading OpenSSL first (~3 ms of every client)
    from _blake2 import blake2b as _blake2b
except ImportError:  # pragma: no cover - an interpreter built without it
    from hashlib import blake2b as _blake2b

PROTOCOL = 1
KINAC_DIR = Path(__file__).resolve().parent.parent
# read per request by the server (so not part of the name): the rest of KINAC_* is per process
REQUEST_ENV = ("KINAC_DEBUG", "KINAC_SERVER", "KINAC_CACHE_DIR", "NO_COLOR", "FORCE_COLOR")
SOCKET_MAX = 100  # sun_path holds 108 bytes on Linux (104 on macOS)
_FINGERPRINT: str | None = None


def version_fingerprint(fresh: bool = False) -> str:
    """The compiler's identity: interpreter, kinac's version, and every source file's size and
    mtime (~340 stat calls, ~2 ms: ``os.scandir``, not ``os.walk`` and ``relpath``, which took
    three times as long); computed once per process unless ``fresh``."""
    global _FINGERPRINT
    if _FINGERPRINT is None or fresh:
        h = _blake2b(_bytes(f"{PROTOCOL}\0{sys.version}\0{sys.executable}\0"), digest_size=12)
        _fingerprint_dir(str(KINAC_DIR), "", h)
        _FINGERPRINT = h.hexdigest()
    return _FINGERPRINT


def _fingerprint_dir(path: str, rel: str, h: Any) -> None:
    """Feed ``h`` every source file under ``path`` (sorted, ``__pycache__`` skipped)."""
    try:
        with os.scandir(path) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return
    for e in entries:
        name = e.name
        try:
            if e.is_dir(follow_symlinks=False):
                if name != "__pycache__":
                    _fingerprint_dir(e.path, f"{rel}{name}/", h)
            elif name.endswith((".py", ".kina", ".md")):
                st = e.stat()
                h.update(_bytes(f"{rel}{name}\0{st.st_size}\0{st.st_mtime_ns}\0"))
        except OSError:
            continue


def _bytes(text: str) -> bytes:
    """``text`` as the file system gives it back: a path that is not UTF-8 (a Latin-1 folder
    name) holds lone surrogates, which ``str.encode()`` refuses (the client died with a bare
    ``UnicodeEncodeError`` before any command ran)."""
    return text.encode("utf-8", "surrogateescape")


def process_env(environ: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    """The ``KINAC_*`` variables a server reads once (so they name its socket)."""
    return {
        k: v
        for k, v in sorted(environ.items())
        if k.startswith("KINAC_") and k not in REQUEST_ENV and not k.startswith("KINAC_SERVER")
    }


def socket_path(root: Path, cache_dir: Path, environ: dict[str, str] | os._Environ[str]) -> Path:
    """``<cache>/server-<digest>.sock``; a per-user temp folder when that path is too long."""
    h = _blake2b(digest_size=8)
    for part in (str(root), str(cache_dir), version_fingerprint(), repr(process_env(environ))):
        h.update(_bytes(part) + b"\0")
    name = f"server-{h.hexdigest()}.sock"
    path = cache_dir / name
    if len(os.fsencode(path)) <= SOCKET_MAX:
        return path
    import tempfile

    return Path(tempfile.gettempdir()) / f"kinac-{os.getuid()}" / name


def starting_marker(sock: Path) -> Path:
    """The file that says a server for ``sock`` is starting (``KINAC_SERVER=auto``)."""
    return sock.with_name(sock.name.removesuffix(".sock") + ".starting")


def locate_root(path: str) -> tuple[Path, Path | None] | None:
    """``kinac.session.locate``'s workspace root and kina.toml, without importing it (the test
    compares them); None where ``locate`` would refuse the path (the local build says why)."""
    p = Path(path)
    try:
        if p.is_dir():
            root = p.resolve()
            cfg = root / "kina.toml"
            return root, cfg if os.path.lexists(cfg) else None
        if p.name == "kina.toml" and p.is_file():
            return p.resolve().parent, p.resolve()
        if p.suffix != ".kina" or not p.is_file():
            return None
        f = p.resolve()
        for d in f.parents:
            if os.path.lexists(d / "kina.toml"):
                return d, d / "kina.toml"
        return f.parent, None
    except OSError:
        return None


def _absolute(p: Path) -> Path:
    """``p`` resolved, or only made absolute where it cannot be (a symlink loop: the cache's
    store then says it cannot use it, where ``resolve`` raised ``RuntimeError``)."""
    try:
        return p.resolve()
    except (RuntimeError, OSError):
        return Path(os.path.abspath(p))


def cache_dir_of(
    root: Path, config: Path | None, cli_dir: str | None, environ: dict[str, str] | os._Environ[str]
) -> Path:
    """``kinac.session.choose_cache_dir`` without importing it (the test compares them)."""
    if cli_dir:
        return _absolute(Path(cli_dir))
    env = environ.get("KINAC_CACHE_DIR")
    if env:
        return _absolute(Path(env))
    if config is not None:
        try:  # not a pipe (it would block): the local build reports what is wrong
            text = config.read_text(encoding="utf-8") if config.is_file() else ""
        except (OSError, UnicodeDecodeError):
            text = ""
        cdir = None
        if "cache_dir" in text:  # else no TOML parser to import (~3 ms of every client)
            import tomllib

            try:
                cdir = tomllib.loads(text).get("workspace", {}).get("cache_dir")
            except (tomllib.TOMLDecodeError, AttributeError):
                cdir = None
        if isinstance(cdir, str) and cdir:
            return _absolute(root / cdir)
    return root / ".kinac-cache"


# The commands a client forwards, with their flags: those taking a value, and switches. Any
# other argument (--help, an unknown or abbreviated flag, a second path) builds locally, where
# argparse reports it exactly as it always has.
_VALUED = {
    "build": {"--target", "--color", "--cache-dir"},
    "check": {"--format", "--color", "--cache-dir"},
}
_SWITCHES = {
    "build": {"--json", "--why", "--shardings", "--visualize", "--debug"},
    "check": {"--types", "--debug"},
}


class Request:
    """What the client read from its command line: enough to name the server's socket."""

    def __init__(self, command: str, path: str, cache_dir: str | None, no_server: bool) -> None:
        self.command, self.path, self.cache_dir, self.no_server = (
            command,
            path,
            cache_dir,
            no_server,
        )


def read_argv(argv: list[str]) -> Request | None:
    """The forwardable reading of ``argv`` (``kinac [--debug] build|check ...``), or None."""
    i = 0
    while i < len(argv) and argv[i] == "--debug":
        i += 1
    if i >= len(argv) or argv[i] not in _VALUED:
        return None
    command, rest = argv[i], argv[i + 1 :]
    path: str | None = None
    cache_dir: str | None = None
    no_server = False
    j = 0
    while j < len(rest):
        a = rest[j]
        flag, eq, value = a.partition("=")
        if a == "--no-server":
            no_server = True
        elif a == "--no-cache":
            return None  # nothing resident to reuse: a process-local build by definition
        elif flag in _VALUED[command]:
            if not eq:
                if j + 1 >= len(rest):
                    return None
                j += 1
                value = rest[j]
            if flag == "--cache-dir":
                cache_dir = value
        elif a in _SWITCHES[command]:
            pass
        elif a.startswith("-") or path is not None:
            return None
        else:
            path = a
        j += 1
    if path is None:
        path = "."  # build's and check's default
    return Request(command, path, cache_dir, no_server)
