#!/usr/bin/env bash
# The project's test command (README, second command; .ci/run runs exactly this).
# Installs kinac with its test extra at the locked versions (constraints.txt), checks the lock
# is current, audits the locked set for known vulnerabilities (scripts/audit.sh), then: ruff,
# mypy, and the test suite (GPU tests skip without a GPU; scripts/gpu.sh runs them on a GPU
# machine). docs/development.md explains each step.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[test]'
python3 scripts/lock.py --check
bash scripts/audit.sh
python3 -m ruff check kinac tests benches scripts
python3 -m mypy kinac
python3 -m pytest -p no:cacheprovider "$@"
