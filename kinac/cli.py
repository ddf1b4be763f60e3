"""The ``kinac`` command line (also ``python -m kinac``).

Exit codes: 0 clean, 1 errors in the program (diagnostics, a failed call or run), 2 usage or
configuration errors (bad path, flag, ``kina.toml`` or inputs file), 3 an internal error (a bug
in kinac: one line, the traceback only with ``--debug`` or ``KINAC_DEBUG=1``), 130 interrupted;
4: a rank of a launched run stopped because another rank failed (docs/distributed.md).
Every :class:`kinac.errors.KinaError` becomes one ``kinac: error: ...`` line with its class's
exit code. Imports are lazy so that ``kinac --help`` and a no-op build start fast.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

from kinac.cli_cache import cmd_cache  # noqa: F401 - dispatched by name (``cmd_<command>``)
from kinac.cli_output import (
    Progress,
    config_ok,
    jsonable,
    plural,
    print_diags,
    summary,
    types_json,
    types_text,
    why_text,
)
from kinac.cli_parser import (  # noqa: F401 - DESCRIPTION re-exported
    DESCRIPTION,
    build_parser,
    parse_command_line,
)
from kinac.errors import EXIT_INTERNAL, EXIT_OK, EXIT_PROGRAM_ERRORS, EXIT_USAGE, KinaError

__all__ = ["EXIT_INTERNAL", "EXIT_OK", "EXIT_PROGRAM_ERRORS", "EXIT_USAGE", "build_parser", "main"]


def main(argv: list[str] | None = None) -> int:
    from kinac.compiler_gc import compiler_gc

    compiler_gc()  # a compiling process: fewer garbage collections (see there)
    parser = build_parser()
    args = parse_command_line(parser, argv)
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
    finally:
        while OPEN_SESSIONS:  # in-process callers must not keep the cache's files open
            OPEN_SESSIONS.pop().close()


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


OPEN_SESSIONS: list[Any] = []  # opened by this call of ``main``, closed when it returns


SESSION_HOOK: Any = None  # set by kinac.server while it runs a request: its resident session


def _command_words(args: argparse.Namespace) -> str:
    """The command as typed before its path (``check``, ``cache stats``), for messages that
    say what to run instead."""
    words = [getattr(args, "command", None) or "check"]
    if words[0] == "cache" and getattr(args, "action", None):
        words.append(args.action)
    return " ".join(words)


def open_session(args: argparse.Namespace) -> Any:
    if SESSION_HOOK is not None:
        resident = SESSION_HOOK(args)
        if resident is not None:
            return resident
    from kinac.session import Session

    sess = Session(
        args.path,
        cache_dir=args.cache_dir,
        no_cache=args.no_cache,
        target=getattr(args, "target", None),
        command=_command_words(args),
    )
    OPEN_SESSIONS.append(sess)
    return sess


def cmd_check(args: argparse.Namespace) -> int:
    sess = open_session(args)
    if not config_ok(
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
                {"diagnostics": found, "types": types_json(sess, report)} if args.types else found,
                indent=2,
            )
        )
    else:
        print_diags(sess, diags, args.color)
        if args.types:
            print(types_text(sess, report))
        sources = [f for f in report.files if f.file != "kina.toml"]
        print(f"checked {plural(len(sources), 'file')}: {summary(diags)}", file=sys.stderr)
    return EXIT_PROGRAM_ERRORS if any(d.severity == "error" for d in diags) else EXIT_OK


def cmd_build(args: argparse.Namespace) -> int:
    sess = open_session(args)
    t0 = time.perf_counter()
    empty = {"queries_executed": 0, "queries_reused": 0, "executed": [], "artifacts": []}
    if not config_ok(sess, json_doc=empty if args.json else None):
        return EXIT_USAGE
    with Progress(sess, enabled=not args.json and sys.stderr.isatty()):
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
                {"query": e.query, "stage": e.stage, "key": jsonable(e.key)} for e in executed
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
        print_diags(sess, diags, args.color)
        if args.why:
            print(
                why_text(
                    [ev.chain(e.qid, sess.db.describe) for e in executed], len(ev.reused_events)
                )
            )
        visualize = getattr(args, "visualize", False)  # implies --shardings
        if (args.shardings or visualize) and not report.error_count:
            _print_shardings(sess, args.color, visualize)
        sources = [f for f in report.files if f.file != "kina.toml"]
        print(
            f"built {plural(len(sources), 'file')}, {plural(len(report.artifacts), 'artifact')}: "
            f"{summary(diags)} ({plural(len(executed), 'query', 'queries')} run, "
            f"{len(ev.reused_events)} reused, {seconds * 1000:.0f} ms)",
            file=sys.stderr,
        )
    return EXIT_PROGRAM_ERRORS if report.error_count else EXIT_OK


def _print_shardings(sess: Any, color: str, visualize: bool = False) -> None:
    """``build --shardings``: every kina.toml entry's plan (``shard_propagate``) as tables."""
    from rich.console import Console

    from kinac import pipeline
    from kinac.diag.render import use_color
    from kinac.pipeline_grad_shard import grad_shardings_tables
    from kinac.shard.report import shardings_tables

    cfg = pipeline.config(sess.db, ()).config
    kind = pipeline.target(sess.db, ()).kind
    console = Console(no_color=not use_color(color), highlight=False, width=200)
    for entry in cfg.entries if cfg is not None else ():
        found = pipeline.find_defn(sess.db, (entry.defn, entry.file))
        if len(found) != 1:
            continue  # reported by the build
        key = pipeline.EntryKey(found[0].file, entry.defn, entry.dims, entry.dtypes, kind)
        graph = pipeline.entry_graph(sess.db, key).graph
        plan = pipeline.shard_propagate(sess.db, key)
        if graph is not None and plan is not None:
            for table in shardings_tables(entry.name, graph, plan, sess.resolve):
                console.print(table)
            for table in grad_shardings_tables(sess.db, entry, key, sess.resolve):  # grad = [..]
                console.print(table)
            if visualize:
                from kinac.shard.report import layout_pictures

                for picture in layout_pictures(entry.name, graph, plan, bool(use_color(color))):
                    console.print(picture)


def cmd_watch(args: argparse.Namespace) -> int:
    from kinac.watch import watch

    off = os.environ.get("KINAC_SERVER", "").strip().lower() in ("0", "off", "no", "false")
    return watch(open_session(args), serve=not (args.no_server or off or args.no_cache))


def cmd_serve(args: argparse.Namespace) -> int:
    """``kinac serve``: :mod:`kinac.server.serve` (its session outlives every request)."""
    from kinac.errors import KinaUsageError

    if not args.idle_timeout > 0:
        raise KinaUsageError(f"--idle-timeout must be positive, got {args.idle_timeout:g}")
    from kinac.server.serve import serve
    from kinac.session import Session

    return serve(
        Session(args.path, cache_dir=args.cache_dir, target=args.target, command="serve"),
        args.idle_timeout,
    )


def cmd_run(args: argparse.Namespace) -> int:
    from kinac.run import run_entry

    return run_entry(args)


def cmd_profile(args: argparse.Namespace) -> int:
    from kinac.run import profile_command

    return profile_command(args)


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


def cmd_train(args: argparse.Namespace) -> int:
    """``kinac train``: :mod:`kinac.train.cli`."""
    from kinac.train.cli import run

    return run(args)


def cmd_launch(args: argparse.Namespace) -> int:
    """``kinac launch -n N -- COMMAND``: :mod:`kinac.rt.comm.launch`."""
    from kinac.errors import KinaUsageError
    from kinac.rt.comm.launch import launch_command

    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if args.timeout is not None and not args.timeout > 0:
        raise KinaUsageError(f"--timeout must be positive, got {args.timeout:g}")
    with _ranks_stop_on_termination():
        return launch_command(args.nproc, cmd, master_port=args.master_port, timeout_s=args.timeout)


@contextlib.contextmanager
def _ranks_stop_on_termination() -> Iterator[None]:
    """SIGTERM (a scheduler's or CI's timeout) and SIGHUP (the terminal closed) end ``kinac
    launch`` as Ctrl-C does: the launcher's clean-up terminates every rank, and the process
    exits 128 + the signal. Before, the launcher died and its ranks ran on."""
    import signal

    def stop(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)  # unwinds through the launcher's ``finally``

    saved = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            saved[sig] = signal.signal(sig, stop)
        except ValueError:  # not the main thread: leave the signals alone
            pass
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


if __name__ == "__main__":  # last: every ``cmd_*`` handler is defined by now
    sys.exit(main())
