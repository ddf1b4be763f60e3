"""Which defn a compiled defn is (:class:`kinac.api.CompiledDefn`): the kina.toml entry or defn
a name means, and when none, why (a file that does not read may define it; otherwise what
there is, and the closest name). Kept apart from the call path: it runs once, at compile.
"""

from __future__ import annotations

import os
from typing import Any

from kinac.errors import KinaCompileError, KinaConfigError, KinaUsageError


def render(sess: Any, diags: list[Any]) -> str:
    """Diagnostics as an error message shows them (plain text, the session's sources)."""
    from kinac.diag.render import plain_text

    return plain_text(diags, sess.resolve, sess.source_of).rstrip()  # type: ignore[no-any-return]


def locate(sess: Any, path: str | os.PathLike[str], name: str, hint: str) -> tuple[Any, Any]:
    """The kina.toml entry named ``name`` (None when it names a defn) and the key of the defn
    it runs; a config error, an unknown name or a defn that is not exactly one is raised.
    ``hint`` says how a defn that is no entry is run (``CompiledDefn.RUN_DEFN_HINT``)."""
    from kinac import pipeline

    db = sess.db
    errors = sess.config_errors()
    if errors:
        raise KinaConfigError("\n".join(errors))
    cfg = pipeline.config(db, ()).config
    entry = next((e for e in cfg.entries if e.name == name), None) if cfg else None
    defn_name = entry.defn if entry is not None else name
    found = pipeline.find_defn(db, (defn_name, entry.file if entry else None))
    if not found:
        # the defn may be in a file that does not read (not UTF-8, syntax errors): say that
        unread_by_file = {
            f: errs
            for f in pipeline.source_files(db, ())
            if (errs := [d for d in pipeline.parse_diagnostics(db, f) if d.is_error])
        }
        if unread_by_file:
            unread = [d for errs in unread_by_file.values() for d in errs]
            raise KinaCompileError(
                render(sess, unread)
                + "\n"
                + _not_in_readable_files(
                    sess, name, defn_name, entry, path, cfg, unread_by_file, hint
                )
            )
        if entry is None:
            raise KinaUsageError(_unknown_name(sess, name, path, cfg, hint))
    if len(found) != 1:
        where = (
            "no defn" if not found else "several defns (" + ", ".join(k.file for k in found) + ")"
        )
        raise KinaCompileError(f"{where} named `{defn_name}` in {path}")
    return entry, found[0]


def _not_in_readable_files(
    sess: Any,
    name: str,
    defn_name: str,
    entry: Any,
    path: Any,
    cfg: Any,
    unread: dict[str, Any],
    hint: str,
) -> str:
    """After the diagnostics of files that do not read: the defn may be in one of them, so
    say that, never "no entry named X (did you mean X?)" about an entry that exists."""
    files = ", ".join(sorted(unread))
    has = "has" if len(unread) == 1 else "have"
    where = f"{files} {has} errors (above) and may define it: fix them and run again"
    if entry is not None:
        return f"entry `{name}` runs defn `{defn_name}`, which no file that reads defines; {where}"
    return _unknown_name(sess, name, path, cfg, hint) + f"\n  {where}"


def _unknown_name(sess: Any, name: str, path: Any, cfg: Any, hint: str) -> str:
    """A name that is neither an entry nor a defn: what there is, and the closest match."""
    from kinac import pipeline
    from kinac.pipeline_support import did_you_mean

    db = sess.db
    entries = [e.name for e in cfg.entries] if cfg is not None else []
    defns = list(
        dict.fromkeys(
            n for f in pipeline.source_files(db, ()) for n in pipeline.file_index(db, f).defns
        )
    )
    lines = [
        f"no entry or defn named `{name}` in {path}"
        + did_you_mean(name, [c for c in (*entries, *defns) if c != name])
    ]
    lines.append(f"  entries (kina.toml): {', '.join(entries) if entries else 'none'}")
    if defns:
        lines.append(
            f"  defns ({hint}): {', '.join(defns[:20])}{' ...' if len(defns) > 20 else ''}"
        )
    return "\n".join(lines)
