"""``kinac explain CODE``: long explanations, one markdown page per code in ``explain/``."""

from __future__ import annotations

import re
from pathlib import Path

EXPLAIN_DIR = Path(__file__).resolve().parent / "explain"


def explanation(code: str) -> str | None:
    """The page for ``code`` (case-insensitive; the digits alone, ``0203``, name K0203), or
    None when there is none."""
    code = code.strip().upper()
    if re.fullmatch(r"\d{4}", code):
        code = "K" + code
    if not re.fullmatch(r"K\d{4}", code):
        return None
    page = EXPLAIN_DIR / f"{code}.md"
    return page.read_text(encoding="utf-8") if page.is_file() else None
