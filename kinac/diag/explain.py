"""``kinac explain CODE``: long explanations, one markdown page per code in ``explain/``."""

from __future__ import annotations

import re
from pathlib import Path

EXPLAIN_DIR = Path(__file__).resolve().parent / "explain"


def explanation(code: str) -> str | None:
    """The page for ``code`` (case-insensitive), or None when there is none."""
    code = code.strip().upper()
    if not re.fullmatch(r"K\d{4}", code):
        return None
    page = EXPLAIN_DIR / f"{code}.md"
    return page.read_text(encoding="utf-8") if page.is_file() else None
