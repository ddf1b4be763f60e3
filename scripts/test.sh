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
# The build backend is the locked setuptools already installed (no isolated build environment
# downloaded for every run: ~3 s). A Python without setuptools, or with one older than 70.1
# (pyproject.toml asks for >= 68, and before 70.1 `bdist_wheel` needs the separate `wheel`
# package: a fresh Python 3.11 ships 65.5 without it), gets the isolated build.
isolation=()
python3 -c "import setuptools, sys; v = tuple(int(p) for p in setuptools.__version__.split('.')[:2]); sys.exit(v < (70, 1))" \
  2>/dev/null && isolation=(--no-build-isolation)
python3 -m pip install -q --disable-pip-version-check ${isolation[@]+"${isolation[@]}"} -c constraints.txt -e '.[test]'
python3 scripts/lock.py --check
python3 -m ruff check kinac tests benches scripts
# The audit waits on the network (~8 s) and mypy on one core (kinac and tests: ~42 s cold, as
# on a fresh clone, on a loaded 2-core machine; kinac alone ~14 s): both run beside the tests
# (~10 min), whose process leaves the second core mostly idle. Their output comes after the
# tests'; any of the three failing fails the run.
mkdir -p build
bash scripts/audit.sh >build/test-audit.log 2>&1 &
audit_pid=$!
python3 -m mypy kinac tests >build/test-mypy.log 2>&1 &
mypy_pid=$!
trap 'kill "$audit_pid" "$mypy_pid" 2>/dev/null || true' EXIT  # an interrupted run stops them
status=0
python3 -m pytest -p no:cacheprovider "$@" || status=$?
wait "$audit_pid" || { status=1; echo "test.sh: the audit failed" >&2; }
cat build/test-audit.log
wait "$mypy_pid" || { status=1; echo "test.sh: mypy failed" >&2; }
cat build/test-mypy.log
exit "$status"
