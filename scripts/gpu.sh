#!/usr/bin/env bash
# The whole GPU test suite and every GPU benchmark, in one go (one device call):
#   bash scripts/gpu.sh            (from the repository root, on a machine with an NVIDIA GPU)
# Runs `pytest -m gpu` over tests/ and then every benches/*.py that carries the line
# "# kinac-bench: gpu" (with --gpu --out DIR).  Logs and results go under $OUT when it is set
# (else ./gpu-out): pytest_gpu.log, junit_gpu.xml, bench_<name>.log, plus what the benches
# and tests write there (runtime_bench.md/.json, soak.json).  Wheels in ./.whl (packages the
# GPU machine lacks) are installed into /tmp/site first.  Exit status: non-zero if any step
# failed; every step runs regardless.
# KINAC_BENCH_QUICK=1: benches carrying "# kinac-bench: quick" get --quick (benches/gpu.py and
# benches/call_overhead.py: about 150 s together on an H200); KINAC_BENCH_ONLY="gpu call_overhead":
# only those benches run.
# Then a short runtime soak (issue 17 item 5): KINAC_SOAK_MINUTES (default 0.5; e.g. 10 for the
# long one, or `bash scripts/gpu.sh --soak-minutes 10`) writes soak_samples.csv/.json/.png.
set -uo pipefail
SOAK_MINUTES="${KINAC_SOAK_MINUTES:-0.5}"
if [ "${1:-}" = "--soak-minutes" ] && [ -n "${2:-}" ]; then SOAK_MINUTES="$2"; fi
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu-out}"
export OUT
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
status=0
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1
  python3 -c "import sys, cuda.bindings, torch; print(sys.version.split()[0], 'cuda-bindings', cuda.bindings.__version__, 'torch', torch.__version__)" 2>&1
} | tee "$OUT/env.txt"

echo "== pytest -m gpu"
python3 -m pytest -m gpu tests -p no:cacheprovider -q -rs --durations=15 \
  --continue-on-collection-errors --junitxml="$OUT/junit_gpu.xml" -s 2>&1 | tee "$OUT/pytest_gpu.log"
rc=${PIPESTATUS[0]}
echo "pytest exit status: $rc"
[ "$rc" -eq 0 ] || status=1

for bench in benches/*.py; do
  grep -q "^# kinac-bench: gpu" "$bench" || continue
  name="$(basename "$bench" .py)"
  if [ -n "${KINAC_BENCH_ONLY:-}" ] && [[ " $KINAC_BENCH_ONLY " != *" $name "* ]]; then continue; fi
  quick=()
  if [ -n "${KINAC_BENCH_QUICK:-}" ] && grep -q "^# kinac-bench: quick" "$bench"; then quick=(--quick); fi
  echo "== $bench ${quick[*]}"
  python3 "$bench" --gpu --out "$OUT" "${quick[@]}" 2>&1 | tee "$OUT/bench_$name.log"
  rc=${PIPESTATUS[0]}
  echo "$bench exit status: $rc"
  [ "$rc" -eq 0 ] || status=1
done

echo "== runtime soak ($SOAK_MINUTES min)"
python3 benches/runtime.py --gpu --out "$OUT" --soak-minutes "$SOAK_MINUTES" 2>&1 | tee "$OUT/soak.log"
rc=${PIPESTATUS[0]}
echo "soak exit status: $rc"
[ "$rc" -eq 0 ] || status=1
exit $status
