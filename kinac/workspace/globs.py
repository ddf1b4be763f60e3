"""The glob language of ``kina.toml``'s ``sources`` and ``exclude`` (and an entry's ``file``
check): path globs, as a user of a shell, ``.gitignore`` or Cargo expects.

Why not ``fnmatch``: its ``*`` crosses ``/``, so ``sources = ["*.kina"]`` also took every
``.kina`` file in every subfolder (``model/old/x.kina``), which no one writing ``*.kina``
means. Here a pattern is matched one path segment at a time:

* ``*`` matches any run of characters within one segment, ``?`` one character, ``[abc]`` /
  ``[!abc]`` one character of (not of) a set: never a ``/``;
* ``**`` as a whole segment matches zero or more segments (``**/*.kina``: every ``.kina`` file
  at any depth, the top level included; ``src/**``: everything under ``src``); ``**`` inside
  a segment (``a**b``) is two ``*``;
* a pattern that matches a folder matches every file under it (``exclude = ["gen"]`` or
  ``["gen/*"]`` leaves out all of ``gen/``, subfolders included, as in ``.gitignore``);
* matching is case-sensitive on every system (a workspace builds the same everywhere), a
  trailing ``/`` and ``.`` segments are ignored.

Paths are workspace-relative with ``/`` separators (``list_sources``' listing). The docs are
``docs/language.md`` ("Source files, workspaces and entries") and ``kina.toml.example``.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from functools import lru_cache


@lru_cache(maxsize=256)
def _segments(pattern: str) -> tuple[str, ...]:
    """The pattern's segments, ``.`` and empty ones dropped, runs of ``**`` merged."""
    out: list[str] = []
    for seg in pattern.replace("\\", "/").split("/"):
        if seg in ("", "."):
            continue
        if seg == "**" and out and out[-1] == "**":
            continue
        out.append(seg)
    return tuple(out)


def _match(pat: tuple[str, ...], segs: tuple[str, ...]) -> bool:
    """Whether the segments ``segs`` match the pattern segments ``pat`` exactly."""
    if not pat:
        return not segs
    head = pat[0]
    if head == "**":
        return any(_match(pat[1:], segs[i:]) for i in range(len(segs) + 1))
    return bool(segs) and fnmatchcase(segs[0], head) and _match(pat[1:], segs[1:])


def glob_match(path: str, pattern: str) -> bool:
    """Whether workspace-relative ``path`` is selected by ``pattern``: the path itself, or one
    of the folders it sits in, matches (see the module docstring)."""
    pat = _segments(pattern)
    if not pat:
        return False
    segs = tuple(s for s in path.split("/") if s not in ("", "."))
    return any(_match(pat, segs[:k]) for k in range(len(segs), 0, -1))
