# Sourced (from the repository root) by scripts/multi_gpu.sh and scripts/gpu_split.sh: the wheels
# the GPU machine lacks (.whl/) installed into /tmp/site once per machine, the import path, and
# NVLink multicast kept off (KINDS.md). One copy, so the two scripts set up the same way.
if compgen -G ".whl/*.whl" >/dev/null && [ ! -d /tmp/site/pydantic ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl
fi
export PYTHONPATH="$PWD:/tmp/site" PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
