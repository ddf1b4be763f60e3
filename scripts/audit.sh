#!/usr/bin/env bash
# Audit kinac's locked dependency set (constraints.txt) for known vulnerabilities with pip-audit
# (PyPI's vulnerability data, per pinned release). Fails on any known vulnerability: upgrade the
# package, re-lock (python3 scripts/lock.py) and re-run the suite. Run by scripts/test.sh (CI).
#
#   bash scripts/audit.sh            # report in build/audit/pip-audit.json
#   bash scripts/audit.sh --strict   # also fail when a pin could not be audited at all
#
# Without --strict a pin the service could not look up (a network that does not serve PyPI's
# per-release JSON) is a loud warning, not a failure: CI must not fail on the network, and
# must not pass silently either (docs/development.md, "Dependencies").
set -uo pipefail
cd "$(dirname "$0")/.."
strict=""
[[ "${1:-}" == "--strict" ]] && strict=1
mkdir -p build/audit
report=build/audit/pip-audit.json
python3 -m pip_audit -r constraints.txt --no-deps --disable-pip --progress-spinner off \
  -f json -o "$report" 2>build/audit/pip-audit.log
rc=$?
if [[ ! -s "$report" ]]; then
  echo "audit: pip-audit failed (exit $rc) before writing a report:" >&2
  tail -5 build/audit/pip-audit.log >&2
  exit 1
fi
python3 scripts/audit_summary.py "$report" ${strict:+--strict}
