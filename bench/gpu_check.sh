#!/usr/bin/env bash
# The torch executor on a real GPU, in one short run (≤ 5 minutes on an H100/H200):
#   1. the CPU exactness tests again, on CUDA (paged = dense; recompute, swap, prefix hits and
#      prefixes promoted from the host and disk tiers give the same output; pool bytes as planned);
#   2. pool memory as pynvml sees it against the memory plan;
#   3. `kvgate calibrate --device cuda` (a sim profile of this GPU), a throughput figure and the
#      KV tiers' round-trip GiB/s (pinned host, disk) against a plain copy;
#   4. `kvgate run` with the torch executor, when that command exists in this checkout.
# Usage: bash bench/gpu_check.sh            (writes into $OUT, else ./gpu_check_out)
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=${OUT:-gpu_check_out}
mkdir -p "$OUT"
status=0
step() { echo; echo "=== $* ==="; }

step "device"
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv || true
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))" || exit 2

step "1. exactness tests on CUDA"
KVGATE_TORCH_DEVICE=cuda timeout 150 $PY -m pytest -q -p no:cacheprovider -m torch \
  tests/integration/test_torch_exactness.py tests/unit/executors/test_torch_attention.py \
  tests/unit/executors/test_torch_executor.py tests/unit/executors/test_divergence.py \
  tests/integration/test_torch_tier_exactness.py tests/unit/executors/test_torch_tiers.py \
  tests/integration/test_torch_pd_exactness.py || status=1

step "2. pool memory: pynvml vs the plan"
timeout 120 $PY - <<'EOF' || status=1
import pynvml, torch
from reference_engine import EngineConfig, with_overrides
from reference_engine.memory import GIB, MemoryPlan
from reference_engine.executors.torch_executor import TorchExecutor

pynvml.nvmlInit()
handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
used = lambda: pynvml.nvmlDeviceGetMemoryInfo(handle).used
torch.zeros(1, device="cuda")  # the CUDA context, before the baseline
for pool_gib in (1.0, 16.0):
    cfg = with_overrides(EngineConfig(), {"model.name": "kvgate-small", "model.weight_dtype": "bf16",
        "model.kv_dtype": "bf16", "engine.executor": "torch", "torch.device": "cuda",
        "hardware.kv_pool_gib": pool_gib})
    plan = MemoryPlan.from_config(cfg)
    torch.cuda.synchronize(); before = used()
    ex = TorchExecutor(cfg, plan)
    torch.cuda.synchronize(); delta = used() - before
    weights = sum(p.numel() * p.element_size() for p in ex.model.parameters())
    planned = plan.num_blocks * plan.bytes_per_block
    pool_seen = delta - weights
    print(f"pool {pool_gib:5.1f} GiB: {plan.num_blocks} blocks; planned {planned / GIB:.4f} GiB, tensor "
          f"{ex.pool_bytes / GIB:.4f} GiB, torch allocated {ex.allocated_pool_bytes / GIB:.4f} GiB, pynvml "
          f"{delta / GIB:.4f} GiB - weights {weights / GIB:.4f} GiB = {pool_seen / GIB:.4f} GiB "
          f"({(pool_seen - planned) / 2**20:+.1f} MiB vs plan)")
    assert ex.pool_bytes == planned and ex.allocated_pool_bytes == planned
    assert abs(pool_seen - planned) < 64 * 2**20, "pynvml disagrees with the plan by more than 64 MiB"
    del ex; torch.cuda.empty_cache()
EOF

step "3. calibration and throughput"
timeout 150 .venv/bin/kvgate calibrate --executor torch --device cuda --model kvgate-small --dtype bf16 \
  --prefill 256,1024,2048,4096 --batches 1,8,32,64,128 --context 1024 \
  --out "$OUT/calibration-cuda-kvgate-small.toml" || status=1
timeout 90 $PY bench/bench_torch.py --device cuda --model kvgate-small --dtype bf16 --requests 64 \
  --prompt 512 --new 64 --paged-vs-dense || status=1
timeout 60 $PY bench/bench_torch_tiers.py --device cuda --blocks 512 || status=1

step "4. kvgate run with the torch executor"
if .venv/bin/kvgate run --help >/dev/null 2>&1; then
  cfg="$OUT/torch_cuda.toml"
  sed -e 's/^executor = "sim"/executor = "torch"/' -e 's/^name = "llama-3.1-8b"/name = "kvgate-small"/' \
    configs/default.toml > "$cfg"
  printf '\n[torch]\ndevice = "cuda"\n' >> "$cfg"
  sed -i 's/^# kv_pool_gib = 52.*/kv_pool_gib = 32/' "$cfg"
  timeout 150 .venv/bin/kvgate run --policy "$cfg" || echo "kvgate run exited $? (see above)"
else
  echo "skipped: this checkout has no 'kvgate run' command yet"
fi

echo; echo "gpu_check: $([ $status -eq 0 ] && echo OK || echo FAILED) (outputs in $OUT)"
exit $status
