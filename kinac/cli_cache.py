"""``kinac cache stats|gc|verify|clear``: the build cache's maintenance commands.

Why a module of its own: :mod:`kinac.cli` reads as the compiler's commands and their exit
codes; this is the cache's administration (:mod:`kinac.rules.cache_admin` does the work), with
its own rule that a command on a workspace never built prints an empty cache's document and
creates nothing.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

from kinac.errors import EXIT_OK, EXIT_PROGRAM_ERRORS, EXIT_USAGE


def _absent_cache(path: str, cache_dir: str | None) -> tuple[Path, int] | None:
    """The cache directory of this workspace and its size limit when the directory does not
    exist yet, else None (opening a session creates it; ``kinac cache`` must not)."""
    from kinac.pipeline_support import list_sources
    from kinac.session import cache_size_limit, choose_cache_dir, locate

    ws = locate(path)
    if ws.config_path is None and ws.single_file is None and not list_sources(ws.root):
        return None  # not a workspace: the session says so
    found = choose_cache_dir(ws, cache_dir)
    return None if found.exists() else (found, cache_size_limit(ws))


# What ``kinac cache ACTION`` prints for an empty cache (tests compare the keys with
# kinac.rules.cache_admin's documents on a real empty cache).
_EMPTY_CACHE_DOCS: dict[str, dict[str, Any]] = {
    "stats": {
        "generation": 0,
        "memos": 0,
        "values": 0,
        "value_bytes": 0,
        "index_bytes": 0,
        "size_limit": 0,
        "memos_by_query": {},
        "quarantined": [],
    },
    "gc": {"memos_dropped": 0, "values_dropped": 0, "quarantined_removed": 0},
    "verify": {
        "ok": 0,
        "dropped": 0,
        "records_dropped": 0,
        "reverse_edges_missing": 0,
        "quarantined": [],
    },
}


def _no_cache_yet(action: str, directory: Path, size_limit: int) -> int:
    """``kinac cache`` where nothing was built: an empty cache's document, nothing created."""
    print(f"kinac: note: no cache at {directory} (nothing was built with it)", file=sys.stderr)
    if action == "clear":
        print(f"nothing to clear at {directory}")
        return EXIT_OK
    doc = dict(_EMPTY_CACHE_DOCS[action])
    if action == "stats":
        doc = {"directory": str(directory), **doc, "size_limit": size_limit}
    print(json.dumps(doc, indent=2))
    return EXIT_OK


def cmd_cache(args: argparse.Namespace) -> int:
    from kinac import cli
    from kinac.rules import cache_admin
    from kinac.rules.cache_files import ValueStoreTimeout

    absent = None
    if cli.SESSION_HOOK is None and not args.no_cache:
        absent = _absent_cache(args.path, args.cache_dir)
    if absent is not None:
        return _no_cache_yet(args.action, *absent)
    sess = cli.open_session(args)
    store = sess.store
    if store is None:
        print("kinac: error: --no-cache leaves no cache to act on", file=sys.stderr)
        return EXIT_USAGE
    store.warn = lambda _msg: None  # reported below, once, as this command's outcome
    try:
        if args.action == "stats":
            print(json.dumps(cache_admin.stats(store), indent=2))
        elif args.action == "gc":
            print(json.dumps(cache_admin.gc(store), indent=2))
        elif args.action == "verify":
            res = cache_admin.verify(store)
            print(json.dumps(res, indent=2))
            damage = [
                *(f"moved {p} aside" for p in res["quarantined"]),
                *([f"dropped {res['dropped']} corrupt values"] if res["dropped"] else []),
                *(
                    [f"dropped {res['records_dropped']} corrupt records"]
                    if res["records_dropped"]
                    else []
                ),
                *(
                    [
                        "rebuilt its reverse-dependency table "
                        f"({res['reverse_edges_missing']} edges missing)"
                    ]
                    if res["reverse_edges_missing"]
                    else []
                ),
            ]
            if damage:
                print(
                    f"kinac: error: the cache at {store.directory} was damaged: {'; '.join(damage)}; "
                    "it is usable again (the next build recomputes what was lost)",
                    file=sys.stderr,
                )
                return EXIT_PROGRAM_ERRORS
        elif args.action == "clear":
            cache_admin.clear(store)
            print(f"cleared {store.directory}")
    except cache_admin.CacheUnusable as e:
        print(f"kinac: error: {e}", file=sys.stderr)
        return EXIT_PROGRAM_ERRORS
    except (sqlite3.Error, ValueStoreTimeout) as e:  # another process's lock, held past the wait
        which = f"{store.directory / 'blobs'}" if isinstance(e, ValueStoreTimeout) else ""
        print(
            f"kinac: error: cache {args.action}: the cache at {store.directory} failed "
            + (
                f"(its value store {which} stayed locked by another process)" if which else f"({e})"
            ),
            file=sys.stderr,
        )
        return EXIT_PROGRAM_ERRORS
    finally:
        store.close()
    if args.action != "verify":
        for w in store.warnings:
            print(f"kinac: warning: {w}", file=sys.stderr)
    return EXIT_OK
