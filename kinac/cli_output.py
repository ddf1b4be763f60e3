"""What the command line prints besides diagnostics: counts, ``--why``, ``--types``, JSON
documents for ``kina.toml`` errors, the progress line. Split from :mod:`kinac.cli` so that
module reads as the commands and their exit codes."""

from __future__ import annotations

import json
import sys
from typing import Any


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 file``, ``2 files``, ``1 query``, ``0 queries``."""
    return f"{n} {word if n == 1 else many or word + 's'}"


def config_ok(sess: Any, json_doc: dict[str, Any] | None = None, as_list: bool = False) -> bool:
    """Print kina.toml's errors (text on stderr; with ``--json``/``--format json`` also a JSON
    document on stdout, so a tool reading stdout sees why); False when there are any."""
    res = sess.config_result()
    for e in res.errors:
        print(f"kinac: error: {sess.config_error_text(e)}", file=sys.stderr)
    if res.errors and (json_doc is not None or as_list):
        diags = [_config_error_json(sess, e) for e in res.errors]
        print(
            json.dumps(diags if as_list else {**(json_doc or {}), "diagnostics": diags}, indent=2)
        )
    if not res.errors:
        for text in _unmatched_sources(sess, res.config):
            print(f"kinac: warning: {text}", file=sys.stderr)
    return not res.errors


def _unmatched_sources(sess: Any, cfg: Any) -> list[str]:
    """A ``sources`` pattern that selects none of the workspace's ``.kina`` files (a typo such
    as ``src/*.kina`` for ``model/*.kina``): the build would say only "built 0 files"."""
    if cfg is None or sess.ws.single_file is not None:
        return []
    from kinac import pipeline
    from kinac.workspace.globs import glob_match

    listing = pipeline.source_listing(sess.db, ())
    if not listing:
        return _all_in_nested(sess.ws.root)
    shown = ", ".join(listing[:3]) + (", ..." if len(listing) > 3 else "")
    files = f"{len(listing)} .kina file{'s' if len(listing) != 1 else ''} under {sess.ws.root}"
    if not cfg.sources:
        return [f"kina.toml: workspace.sources is empty: none of the {files} ({shown}) is read"]
    out: list[str] = []
    nested: dict[str, tuple[str, ...]] | None = None
    for i, pat in enumerate(cfg.sources):
        if any(glob_match(p, pat) for p in listing):
            continue
        if nested is None:
            from kinac.pipeline_support import nested_workspaces

            nested = nested_workspaces(sess.ws.root)
        inside = [d for d, fs in nested.items() if any(glob_match(p, pat) for p in fs)]
        out.append(
            f"kina.toml: workspace.sources[{i}] = {pat!r} matches none of the {files} "
            f"({shown}); patterns are relative to the workspace root" + _deeper_hint(pat, listing)
            if not inside
            else f"kina.toml: workspace.sources[{i}] = {pat!r} names files of the nested "
            f"workspace {inside[0]} (it has its own kina.toml), which its parent does not "
            "read: build it on its own, or remove its kina.toml to make its files the parent's"
        )
    return out


def _all_in_nested(root: Any) -> list[str]:
    """A workspace whose listing is empty while nested workspaces below it hold ``.kina``
    files: "checked 0 files: no errors" alone hid where the files went."""
    import os

    from kinac.pipeline_support import nested_workspaces

    nested = {d: fs for d, fs in nested_workspaces(root).items() if fs}
    if not nested:
        return []
    n = sum(len(fs) for fs in nested.values())
    shown = []
    for d in sorted(nested):
        rel = os.path.relpath(os.path.join(root, d))
        shown.append(os.path.join(root, d) if rel.startswith("..") else rel)
    listed = ", ".join(shown[:3]) + (", ..." if len(shown) > 3 else "")
    whose = (
        f"the nested workspace {listed}, which has"
        if len(shown) == 1
        else f"the nested workspaces {listed}, each with"
    )
    return [
        f"this workspace reads no .kina file: the {n} .kina file{'s' if n != 1 else ''} below "
        f"it belong{'' if n != 1 else 's'} to {whose} its own kina.toml; give "
        f"{'that folder' if len(shown) == 1 else 'one of those folders'} to kinac instead"
    ]


def _deeper_hint(pat: str, listing: tuple[str, ...]) -> str:
    """A hint for a pattern that ``fnmatch`` (kinac's globs before) matched through folders:
    ``*.kina`` where every file is in a subfolder now matches nothing."""
    from fnmatch import fnmatchcase

    if "*" not in pat or not any(fnmatchcase(p, pat) for p in listing):
        return ""
    head, _, tail = pat.rpartition("/")
    deeper = f"{head}/**/{tail}" if head else f"**/{tail}"
    return f", and `*` stays within one folder (for files at any depth: {deeper!r})"


def _config_error_json(sess: Any, e: Any) -> dict[str, Any]:
    """A kina.toml error in the shape of a diagnostic's JSON (code K0154, no source span)."""
    return {
        "code": "K0154",
        "severity": "error",
        "message": sess.config_error_text(e),
        "primary": {"message": e.message, "file": "kina.toml", "key": e.key},
        "secondary": [],
        "notes": [],
        "help": "kina.toml.example lists every key and its type",
        "counterexample": None,
    }


def print_diags(sess: Any, diags: list[Any], color: str = "auto") -> None:
    if not diags:
        return
    from kinac.diag.render import print_diagnostics, use_color

    print_diagnostics(diags, sess.resolve, sess.source_of, color=use_color(color))


def summary(diags: list[Any]) -> str:
    errors = sum(1 for d in diags if d.severity == "error")
    warnings = sum(1 for d in diags if d.severity == "warning")
    if not errors and not warnings:
        return "no errors"
    return f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}"


def _checked_defns(sess: Any, report: Any) -> list[tuple[str, Any]]:
    from kinac import pipeline

    out = []
    for f in report.files:
        if f.file == "kina.toml":
            continue
        for name in dict.fromkeys(pipeline.file_index(sess.db, f.file).defns):
            out.append((f.file, pipeline.check_defn(sess.db, pipeline.DefnKey(f.file, name))))
    return out


def types_text(sess: Any, report: Any) -> str:
    """``check --types``: every defn's let bindings with their inferred types."""
    from kinac.check import format_types

    return "\n\n".join(
        f"; {file}\n{format_types(c)}".rstrip() for file, c in _checked_defns(sess, report)
    )


def types_json(sess: Any, report: Any) -> list[dict[str, Any]]:
    """``check --types --format json``: per defn, its let bindings (name, type, nesting depth)
    and result type, read from the same text ``--types`` prints (one source of truth)."""
    from kinac.check import format_types

    out = []
    for file, checked in _checked_defns(sess, report):
        lines = format_types(checked).rstrip("\n").splitlines()
        doc: dict[str, Any] = {
            "file": file,
            "defn": checked.ref.name,
            "typed": checked.body is not None,
            "bindings": [],
            "result": None,
        }
        for line in lines[1:]:
            text = line.strip()
            if text.startswith("=> "):
                doc["result"] = text[3:]
                continue
            name, _, typ = text.partition(" : ")
            doc["bindings"].append(
                {"name": name, "type": typ, "depth": (len(line) - len(line.lstrip())) // 2}
            )
        out.append(doc)
    return out


def why_text(chains: list[list[str]], reused: int) -> str:
    """``build --why`` as text: per changed input, the queries it re-ran, each with the one
    dependency that made it re-run (the full chains, which repeat each other, are in --json)."""
    if not chains:
        return f"nothing re-ran: no input changed since the last build ({plural(reused, 'query', 'queries')} reused)"
    by_cause: dict[str, list[str]] = {}
    for chain in chains:
        cause = chain[-1]
        step = chain[0] if len(chain) == 1 else f"{chain[0]}  <-  {chain[1]}"
        if len(chain) == 1:
            step += "  (an input: read again)"
        by_cause.setdefault(cause, []).append(step)
    out = []
    for cause, steps in by_cause.items():
        out.append(f"{cause} changed; re-ran {plural(len(steps), 'query', 'queries')}:")
        out.extend(f"  {s}" for s in steps)
    return "\n".join(out)


def jsonable(key: Any) -> Any:
    from kinac.rules.codec import to_plain

    return to_plain(key)


class Progress:
    """A rich status line while a long build runs in a terminal."""

    def __init__(self, sess: Any, enabled: bool) -> None:
        self.sess, self.enabled = sess, enabled
        self.status: Any = None

    def __enter__(self) -> Progress:
        if self.enabled:
            from rich.console import Console

            self.status = Console(stderr=True).status("building…")
            self.status.__enter__()
            log = self.sess.db.events
            original = log.executed

            def hook(q: Any, key: Any, *rest: Any) -> None:
                original(q, key, *rest)
                n = len(log.events)
                if n % 25 == 0 and self.status is not None:
                    self.status.update(f"building… {n} queries ({q.name})")

            log.executed = hook  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.status is not None:
            self.status.__exit__(*exc)
