#!/usr/bin/env bash
# Issue 13's multi-GPU must-shows in one device call on a lent nvidia-h200-x2 or -x4 (docs/distributed.md,
# "What ran, what did not"):
#
#   bash scripts/multi_gpu.sh [SECONDS]        (default 570 s of command time in all)
#
# 1. the multi-GPU tests: tests/test_nccl_multi_gpu.py (the sharded block tp/dp on 2 and 4 GPUs, 2x2 on 4,
#    against one GPU and the simulator within 1e-5; decoder_1m training steps against --simulate N), the
#    two-GPU tests of test_nccl_program.py and test_gpu_multi.py, and test_nccl_backend.py's all-reduce
#    under `kinac launch -n 2`;
# 2. benches/collectives.py at 1, 2 and (with 4 GPUs) 4 ranks under `kinac launch -n N`: every collective's
#    time and bus bandwidth at 1 MiB-1 GiB against NCCL's own call, same run, and the scaling row (the
#    Megatron block's forward, a decoder_1m training step);
# 3. `benches/collectives.py --join`: the scaling table (1, 2, 4 GPUs) and the bandwidth by world size.
#
# Results: $OUT/res_multi.tgz (rewritten after every step, so a call cut short still returns what
# finished): pytest logs, each run's nccl_bench.md/.json, nccl_scaling.md. Set up as scripts/gpu_split.sh
# does (.whl wheels into /tmp/site); NVLink multicast off (KINDS.md).
set -u
cd "$(dirname "$0")/.."
T0=$(date +%s)
LIMIT="${1:-570}"
OUT="${OUT:-$PWD/gpu-out}"; mkdir -p "$OUT"
. scripts/gpu_env.sh  # wheels into /tmp/site, PYTHONPATH, NVLink multicast off
unset WORLD_SIZE RANK LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT
R=/tmp/res_multi; mkdir -p "$R"
save() { tar czf "$OUT/res_multi.tgz" -C /tmp res_multi 2>/dev/null; }
left() { echo $((T0 + LIMIT - $(date +%s))); }
cap() { local l; l=$(left); [ "$l" -lt 1 ] && l=1; [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }  # min(left, CAP), >= 1
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU ")
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvidia-smi topo -m
  echo "GPUs: $GPUS"; git log --oneline -1 2>/dev/null; } > "$R/env.txt" 2>&1
save

# 1. tests (the multi-GPU ones skip themselves below their GPU count)
timeout "$(cap 330)" python3 -m pytest -m gpu -p no:cacheprovider -v -rs -s --durations=20 \
  tests/test_nccl_multi_gpu.py tests/test_gpu_multi.py \
  "tests/test_nccl_program.py::test_two_gpus_run_the_mlp_like_the_simulator" \
  > "$R/pytest_multi.log" 2>&1
echo "pytest exit status $?" >> "$R/pytest_multi.log"
save
timeout "$(cap 60)" python3 -m kinac launch -n 2 --timeout 50 -- python3 -m pytest -m gpu -p no:cacheprovider \
  -q "tests/test_nccl_backend.py::test_two_gpu_all_reduce_through_nccl" > "$R/pytest_launch2.log" 2>&1
echo "exit status $?" >> "$R/pytest_launch2.log"
save

# 2. bandwidth and scaling rows at each world size, then 3. the joined table
runs=()
for n in 1 2 4; do
  [ "$n" -le "$GPUS" ] || continue
  l=$(cap 100); [ "$l" -gt 20 ] || { echo "no time left for $n ranks" >> "$R/env.txt"; continue; }
  s=$(date +%s)
  timeout "$l" python3 -m kinac launch -n "$n" --timeout 90 -- \
    python3 benches/collectives.py --gpu --out "$R/bench_n$n" > "$R/bench_n$n.log" 2>&1
  echo "collectives at $n ranks: exit status $? after $(( $(date +%s) - s )) s" >> "$R/env.txt"
  [ -f "$R/bench_n$n/nccl_bench.json" ] && runs+=("$R/bench_n$n")
  save
done
[ "${#runs[@]}" -gt 0 ] && python3 benches/collectives.py --join "${runs[@]}" --out "$R" > "$R/join.log" 2>&1
save
