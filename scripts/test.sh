#!/usr/bin/env bash
# The project's test command (README, second command; .ci/run runs exactly this).
# Installs kinac with its test extra at the locked versions (constraints.txt), checks the lock
# is current, audits the locked set for known vulnerabilities (scripts/audit.sh), then: ruff,
# mypy, and the test suite (GPU tests skip without a GPU; scripts/gpu.sh runs them on a GPU
# machine). docs/development.md explains each step.
set -euo pipefail
cd "$(dirname "$0")/.."
# The Coq proofs (proofs/, run by tests/test_proofs.py) need coqc: install Debian's coq when it
# is missing, and make the proof tests fail (not skip) without it.
if ! command -v coqc >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "test.sh: installing Debian's coq (apt-get install coq) for the proofs" >&2
  if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq coq; } \
      >/tmp/kinac-coq-install.log 2>&1; then
    echo "test.sh: installing coq failed; see /tmp/kinac-coq-install.log" >&2
    exit 1
  fi
fi
export KINAC_REQUIRE_COQ=1
python3 -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[test]'
python3 scripts/lock.py --check
bash scripts/audit.sh
python3 -m ruff check kinac tests benches scripts
python3 -m mypy kinac
python3 -m pytest -p no:cacheprovider "$@"
