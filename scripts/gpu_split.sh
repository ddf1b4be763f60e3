#!/usr/bin/env bash
# scripts/gpu.sh's work in two back-to-back device calls, so that the 10-minute soak (issue 17)
# costs no more device time than the GPU tests and a warm-up beside it:
#
#   bash scripts/gpu_split.sh soak [SECONDS]          call 1 (default 575 s of command time):
#       starts `benches/runtime.py --soak-minutes 10` detached (setsid: it outlives the call while
#       the machine stays warm), runs `pytest -m gpu` beside it, then a warm-up pass over the GPU
#       benches (their compile caches: kinac's store, torch inductor's), timings discarded and
#       autotuning off, since the soak shares the GPU.
#   bash scripts/gpu_split.sh tests [S1] [S2]          `pytest -m gpu` alone, for a call that
#       re-checks the tests and then runs `timed` without a soak: the tests of the attention
#       kernels and autotuning apart (limit S2, default 150 s) from the rest (S1, default 200 s).
#   bash scripts/gpu_split.sh timed SECONDS BENCH...   call 2, within the machine's 30 s warm
#       window: waits for the soak to end (its files then come back with this call), then each
#       BENCH (a benches/NAME.py, or `before_after` for issue 19's steady-state check against the
#       extracted tree `.before`, `git archive 8119e40`) alone on the GPU, each with what is left
#       of SECONDS as its limit, or NAME:CAP for at most CAP seconds.
#
# Results: $OUT/res_<mode>.tgz (one archive: the device tool returns at most 8 files), rewritten
# after every step so a call cut short still returns what finished. Set up as scripts/gpu.sh does
# (.whl wheels into /tmp/site). The variables that keep NVLink multicast off are set here too.
set -u
cd "$(dirname "$0")/.."
T0=$(date +%s)
MODE="${1:-}"; shift || true
case "$MODE" in soak|timed|tests) ;; *) echo "usage: gpu_split.sh soak [SECONDS] | tests [SECONDS] | timed SECONDS BENCH..." >&2; exit 2 ;; esac
OUT="${OUT:-$PWD/gpu-out}"; mkdir -p "$OUT"
. scripts/gpu_env.sh  # wheels into /tmp/site, PYTHONPATH, NVLink multicast off
R="/tmp/res_$MODE"; mkdir -p "$R" /tmp/soak
save() { tar czf "$OUT/res_$MODE.tgz" -C /tmp "res_$MODE" soak 2>/dev/null; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  python3 -c "import sys, cuda.bindings, torch; print(sys.version.split()[0], 'cuda-bindings', cuda.bindings.__version__, 'torch', torch.__version__)"
} > "$R/env.txt" 2>&1

case "$MODE" in
soak)
  LIMIT="${1:-575}"
  setsid nohup bash -c "cd '$PWD' && date -u > /tmp/soak/started && python3 benches/runtime.py --gpu --out /tmp/soak --soak-minutes 10 > /tmp/soak/soak.log 2>&1; echo \$? > /tmp/soak/rc" \
    > /dev/null 2>&1 < /dev/null &
  timeout 330 python3 -m pytest -m gpu tests -p no:cacheprovider -q -rs --durations=30 \
    --junitxml="$R/junit_gpu.xml" > "$R/pytest_gpu.log" 2>&1
  echo "pytest exit status $?" >> "$R/pytest_gpu.log"
  save
  export KINAC_AUTOTUNE=0
  for b in gpu call_overhead grad train runtime attention collectives; do
    left=$((T0 + LIMIT - $(date +%s))); [ "$left" -gt 15 ] || break
    q=(); grep -q "^# kinac-bench: quick" "benches/$b.py" && q=(--quick)
    s=$(date +%s)
    timeout "$left" python3 "benches/$b.py" --gpu "${q[@]}" --out "$R/warm_$b" > "$R/warm_$b.log" 2>&1
    echo "exit status $? after $(( $(date +%s) - s )) s" >> "$R/warm_$b.log"
    save
  done
  ;;
tests)
  # two runs, each with its own limit, each test named as it ends (-v), so a hang in the newest
  # kernels (attention, autotuning) cannot cost the other tests' results
  sel="attention or autotune or tune"
  timeout "${1:-200}" python3 -m pytest -m gpu tests -k "not ($sel)" -p no:cacheprovider -v -rs \
    --durations=20 --junitxml="$R/junit_gpu.xml" > "$R/pytest_gpu.log" 2>&1
  echo "pytest exit status $?" >> "$R/pytest_gpu.log"
  save
  timeout "${2:-150}" python3 -m pytest -m gpu tests -k "$sel" -p no:cacheprovider -v -rs \
    --durations=20 --junitxml="$R/junit_gpu_attention.xml" > "$R/pytest_gpu_attention.log" 2>&1
  echo "pytest exit status $?" >> "$R/pytest_gpu_attention.log"
  ;;
timed)
  LIMIT="${1:?timed SECONDS BENCH...}"; shift
  n=0
  while [ -f /tmp/soak/started ] && [ ! -f /tmp/soak/rc ] && [ "$n" -lt 240 ]; do sleep 2; n=$((n + 2)); done
  echo "waited $n s for the soak" >> "$R/env.txt"
  save
  for spec in "$@"; do
    b="${spec%%:*}"  # NAME or NAME:CAP (CAP seconds at most for that bench, so a hang cannot eat the call)
    left=$((T0 + LIMIT - $(date +%s))); [ "$left" -gt 15 ] || { echo "no time left for $b" >> "$R/env.txt"; continue; }
    [ "$spec" != "$b" ] && [ "${spec#*:}" -lt "$left" ] && left="${spec#*:}"
    s=$(date +%s)
    if [ "$b" = before_after ]; then
      cp .before/benches/gpu.py .before/benches/gpu_at_8119e40.py
      cp .before/benches/gpu.py benches/gpu_at_8119e40.py
      OUT="$R/before-after" timeout "$left" bash scripts/before_after.sh -t 100 .before -- \
        python3 benches/gpu_at_8119e40.py --gpu --quick --out '{out}' > "$R/before_after.log" 2>&1
    else
      q=(); grep -q "^# kinac-bench: quick" "benches/$b.py" && q=(--quick)
      timeout "$left" python3 "benches/$b.py" --gpu "${q[@]}" --out "$R/$b" > "$R/$b.log" 2>&1
    fi
    echo "$b exit status $? after $(( $(date +%s) - s )) s" >> "$R/env.txt"
    save
  done
  ;;
esac
save
