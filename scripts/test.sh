#!/usr/bin/env bash
# The project's test command (README, second command; .ci/run runs exactly this).
# Installs kinac with its test extra, then: ruff, mypy, and the test suite (GPU tests skip
# without a GPU; scripts/gpu.sh runs them on a GPU machine).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --disable-pip-version-check -e '.[test]'
python3 -m ruff check kinac tests benches
python3 -m mypy kinac
python3 -m pytest -p no:cacheprovider "$@"
