"""Summarise a pip-audit JSON report for ``scripts/audit.sh``.

Why a separate step: pip-audit passes when it could look nothing up (each pin "skipped"), so
the summary says how many pins were really audited. Every known vulnerability fails (exit 1);
an unaudited pin is a warning, or a failure with ``--strict``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def summarise(report: dict, strict: bool) -> tuple[int, list[str]]:
    """The exit status and the lines to print for a pip-audit ``-f json`` report."""
    deps = report["dependencies"]
    lines: list[str] = []
    vulns = [(d["name"], d["version"], v) for d in deps for v in d.get("vulns", [])]
    skipped = [d for d in deps if "skip_reason" in d]
    for name, version, v in vulns:
        fix = ", ".join(v.get("fix_versions", [])) or "none yet"
        lines.append(f"audit: {name} {version}: {v['id']} (fixed in: {fix})")
    audited = len(deps) - len(skipped)
    lines.append(
        f"audit: {audited} of {len(deps)} pinned packages audited, "
        f"{len(vulns)} known vulnerabilities"
    )
    if skipped:
        lines.append(
            f"audit: WARNING: {len(skipped)} pins could not be audited, e.g. "
            f"{skipped[0]['skip_reason']}"
        )
    return (1 if vulns or (strict and skipped) else 0), lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path)
    ap.add_argument("--strict", action="store_true", help="fail when a pin was not audited")
    args = ap.parse_args()
    status, lines = summarise(json.loads(args.report.read_text()), args.strict)
    print("\n".join(lines))
    return status


if __name__ == "__main__":
    sys.exit(main())
