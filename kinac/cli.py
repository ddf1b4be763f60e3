"""The ``kinac`` command line (also ``python -m kinac``).

Exit codes: 0 clean, 1 errors in the program (diagnostics, a failed call or run), 2 usage or
configuration errors (bad path, flag, ``kina.toml`` or inputs file), 3 an internal error (a bug
in kinac: one line, the traceback only with ``--debug`` or ``KINAC_DEBUG=1``), 130 interrupted.
Every :class:`kinac.errors.KinaError` becomes one ``kinac: error: ...`` line with its class's
exit code. Imports are lazy so that ``kinac --help`` and a no-op build start fast.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from kinac.cli_output import (
    _config_ok,
    _jsonable,
    _print_diags,
    _progress,
    _summary,
    _types_json,
    _types_text,
    _why_text,
    plural,
)
from kinac.errors import EXIT_INTERNAL, EXIT_OK, EXIT_PROGRAM_ERRORS, EXIT_USAGE, KinaError

__all__ = ["EXIT_INTERNAL", "EXIT_OK", "EXIT_PROGRAM_ERRORS", "EXIT_USAGE", "build_parser", "main"]

DESCRIPTION = """\
kinac compiles Kina, a shape-typed tensor language, for the CPU and NVIDIA GPUs.
Every stage is an incremental query cached on disk: rebuilds redo only what changed.

common tasks:
  kinac check model.kina            type-check one file (shape errors with counterexamples)
  kinac build workspaces/mlp        check and build a workspace (reads its kina.toml)
  kinac run workspaces/mlp mlp      run an entry point on random inputs and time it
  kinac watch workspaces/mlp        rebuild on every save, redraw the diagnostics
  kinac explain K0203               the long explanation of a diagnostic code
  kinac cache stats                 what the cache holds (also: gc, verify, clear)

exit codes: 0 clean, 1 errors in the program, 2 usage or configuration errors,
            3 internal error (a kinac bug; --debug or KINAC_DEBUG=1 shows its traceback)
colour: --color always|never, else NO_COLOR=1 turns it off and FORCE_COLOR=1 on
"""


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="cache directory (default: $KINAC_CACHE_DIR, kina.toml's workspace.cache_dir, "
        "or WORKSPACE/.kinac-cache)",
    )
    p.add_argument("--no-cache", action="store_true", help="do not read or write the on-disk cache")
    _add_debug(p)


def _add_debug(p: argparse.ArgumentParser) -> None:
    # SUPPRESS: a subcommand's --debug must not reset the top-level one to False
    p.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="on an internal error, print its traceback (also KINAC_DEBUG=1)",
    )


def _count(least: int) -> Any:
    """An argparse type: an int >= ``least`` (argparse turns the ValueError into exit 2)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, got {value}")
        return value

    parse.__name__ = f"int >= {least}"
    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kinac", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version="kinac 0.1.0")
    parser.add_argument(
        "--debug",
        action="store_true",
        help="on an internal error, print its traceback (also KINAC_DEBUG=1)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser(
        "check",
        help="type-check a file or workspace",
        description="Type-check a .kina file or a workspace directory; print diagnostics.",
    )
    p.add_argument("path", help="a .kina file or a workspace directory")
    p.add_argument(
        "--format", choices=["text", "json"], default="text", help="diagnostics as text or JSON"
    )
    p.add_argument(
        "--types", action="store_true", help="also print the inferred type of every let binding"
    )
    p.add_argument("--color", choices=["auto", "always", "never"], default="auto")
    _add_common(p)

    p = sub.add_parser(
        "build",
        help="check and build a workspace's entry points",
        description="Check every file and build every entry point of kina.toml.",
    )
    p.add_argument(
        "path", nargs="?", default=".", help="workspace directory or .kina file (default: .)"
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object: queries run/reused, diagnostics, artifacts",
    )
    p.add_argument(
        "--why", action="store_true", help="for each query that re-ran, the change that caused it"
    )
    p.add_argument("--target", choices=["cpu", "cuda"], help="override kina.toml's target.kind")
    p.add_argument("--color", choices=["auto", "always", "never"], default="auto")
    _add_common(p)

    p = sub.add_parser(
        "run",
        help="build and run one entry point",
        description="Build an entry point and run it on random inputs (from --seed) or on "
        "arrays from a .npz/.npy file; print a summary of the outputs and the time.",
    )
    p.add_argument("path", help="workspace directory or .kina file")
    p.add_argument("entry", help="entry name from kina.toml (or a defn name with --dims)")
    p.add_argument(
        "--seed", type=_count(0), default=0, help="seed of the random inputs (>= 0, default 0)"
    )
    p.add_argument(
        "--inputs",
        metavar="FILE",
        help=".npz (arrays named after the parameters) or .npy (one input)",
    )
    p.add_argument(
        "--dims", metavar="K=V,...", help="concrete dims for a defn that is not a kina.toml entry"
    )
    p.add_argument(
        "--dtypes",
        metavar="T=f32,...",
        help="dtype variables for a defn that is not a kina.toml entry",
    )
    p.add_argument("--target", choices=["cpu", "cuda"], help="override kina.toml's target.kind")
    p.add_argument(
        "--repeat",
        type=_count(1),
        default=10,
        help="timed repetitions after the first call (>= 1, default 10)",
    )
    p.add_argument("--save", metavar="FILE", help="save the outputs to a .npz file")
    _add_common(p)

    p = sub.add_parser(
        "watch",
        help="rebuild on every save",
        description="Watch a workspace; on each save rebuild only what changed and redraw "
        "the diagnostics. Ctrl-C exits.",
    )
    p.add_argument("path", nargs="?", default=".")
    _add_common(p)

    p = sub.add_parser(
        "cache",
        help="inspect or maintain the cache",
        description="stats: what the cache holds; gc: drop unused entries; verify: check every "
        "entry's checksum; clear: delete everything.",
    )
    p.add_argument("action", choices=["stats", "gc", "verify", "clear"])
    p.add_argument("path", nargs="?", default=".", help="workspace whose cache to use (default: .)")
    _add_common(p)

    p = sub.add_parser(
        "explain",
        help="explain a diagnostic code",
        description="Print the long explanation of a diagnostic code, e.g. kinac explain K0203.",
    )
    p.add_argument("code")
    _add_debug(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        handler = globals()[f"cmd_{args.command}"]
        return int(handler(args))
    except KinaError as e:
        text = str(e)
        # rendered diagnostics (``error[K0801]: ...``) already say what they are
        print(
            text if text.startswith(("error[", "warning[")) else f"kinac: error: {text}",
            file=sys.stderr,
        )
        if getattr(args, "json", False) or getattr(args, "format", None) == "json":
            # a tool reading stdout gets a document whatever went wrong
            error = {"kind": type(e).__name__, "message": text, "exit_code": e.exit_code}
            print(json.dumps({"error": error}, indent=2))
        from kinac.rt.cuda.errors import CudaUnavailableError

        if isinstance(e, CudaUnavailableError):
            print(
                "  help: --target cuda runs on an NVIDIA GPU with its driver; without one, "
                "run on the CPU (the default target)",
                file=sys.stderr,
            )
        return e.exit_code
    except KeyboardInterrupt:
        print("kinac: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # ``kinac check ... | head``: the reader left; not an error
        sys.stderr.close()
        return EXIT_OK
    except MemoryError as e:  # host memory exhausted: the input's fault more than kinac's
        print(f"kinac: error: out of memory{': ' + str(e) if str(e) else ''}", file=sys.stderr)
        return EXIT_PROGRAM_ERRORS
    except Exception as e:  # noqa: BLE001 - anything else is a kinac bug: say so in one line
        return _internal_error(
            e, debug=getattr(args, "debug", False) or os.environ.get("KINAC_DEBUG") == "1"
        )


def _internal_error(e: BaseException, debug: bool) -> int:
    """An exception kinac did not expect: one line (and the traceback when debugging), exit 3."""
    if debug:
        import traceback

        traceback.print_exception(e, file=sys.stderr)
    first = (str(e).splitlines() or [""])[0][:300]
    print(
        f"kinac: internal error: {type(e).__name__}: {first}\n"
        f"  this is a bug in kinac, not in your program; please report it"
        + ("" if debug else " with the traceback from --debug (or KINAC_DEBUG=1)"),
        file=sys.stderr,
    )
    return EXIT_INTERNAL


def _session(args: argparse.Namespace) -> Any:
    from kinac.session import Session

    return Session(
        args.path,
        cache_dir=args.cache_dir,
        no_cache=args.no_cache,
        target=getattr(args, "target", None),
    )


def cmd_check(args: argparse.Namespace) -> int:
    sess = _session(args)
    if not _config_ok(
        sess,
        as_list=args.format == "json" and not args.types,
        json_doc={"types": []} if args.format == "json" and args.types else None,
    ):
        return EXIT_USAGE
    report = sess.build(with_artifacts=False)
    diags = sess.diagnostics(report)
    if args.format == "json":
        from kinac.diag.render import to_json

        found = [to_json(d, sess.resolve) for d in diags]
        # without --types the document stays a list of diagnostics (its documented shape)
        print(
            json.dumps(
                {"diagnostics": found, "types": _types_json(sess, report)} if args.types else found,
                indent=2,
            )
        )
    else:
        _print_diags(sess, diags, args.color)
        if args.types:
            print(_types_text(sess, report))
        sources = [f for f in report.files if f.file != "kina.toml"]
        print(f"checked {plural(len(sources), 'file')}: {_summary(diags)}", file=sys.stderr)
    return EXIT_PROGRAM_ERRORS if any(d.severity == "error" for d in diags) else EXIT_OK


def cmd_build(args: argparse.Namespace) -> int:
    sess = _session(args)
    t0 = time.perf_counter()
    empty = {"queries_executed": 0, "queries_reused": 0, "executed": [], "artifacts": []}
    if not _config_ok(sess, json_doc=empty if args.json else None):
        return EXIT_USAGE
    with _progress(sess, enabled=not args.json and sys.stderr.isatty()):
        report = sess.build()
    seconds = time.perf_counter() - t0
    diags = sess.diagnostics(report)
    ev = sess.db.events
    executed = ev.executed_events
    if args.json:
        from kinac.diag.render import to_json

        doc = {
            "queries_executed": len(executed),
            "queries_reused": len(ev.reused_events),
            "executed": [
                {"query": e.query, "stage": e.stage, "key": _jsonable(e.key)} for e in executed
            ],
            "diagnostics": [to_json(d, sess.resolve) for d in diags],
            "artifacts": [
                {"entry": a, "kind": k, "fingerprint": fp} for a, k, fp in report.artifacts
            ],
            "seconds": round(seconds, 4),
        }
        if args.why:
            doc["why"] = [
                {"query": e.query, "chain": ev.chain(e.qid, sess.db.describe)} for e in executed
            ]
        print(json.dumps(doc, indent=2))
    else:
        _print_diags(sess, diags, args.color)
        if args.why:
            print(
                _why_text(
                    [ev.chain(e.qid, sess.db.describe) for e in executed], len(ev.reused_events)
                )
            )
        sources = [f for f in report.files if f.file != "kina.toml"]
        print(
            f"built {plural(len(sources), 'file')}, {plural(len(report.artifacts), 'artifact')}: "
            f"{_summary(diags)} ({plural(len(executed), 'query', 'queries')} run, "
            f"{len(ev.reused_events)} reused, {seconds * 1000:.0f} ms)",
            file=sys.stderr,
        )
    return EXIT_PROGRAM_ERRORS if report.error_count else EXIT_OK


def cmd_watch(args: argparse.Namespace) -> int:
    from kinac.watch import watch

    return watch(_session(args))


def cmd_run(args: argparse.Namespace) -> int:
    from kinac.run import run_entry

    return run_entry(args)


def cmd_cache(args: argparse.Namespace) -> int:
    from kinac.rules import cache_admin

    sess = _session(args)
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
    finally:
        store.close()
    if args.action != "verify":
        for w in store.warnings:
            print(f"kinac: warning: {w}", file=sys.stderr)
    return EXIT_OK


def cmd_explain(args: argparse.Namespace) -> int:
    from kinac.diag.explain import explanation

    text = explanation(args.code)
    if text is None:
        print(
            f"kinac: error: no explanation for {args.code!r} (codes look like K0203)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.markdown import Markdown

        Console().print(Markdown(text))
    else:
        print(text)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
