"""`kvgate calibrate --executor torch`: measure this device, write a sim profile that mimics it.

Runs real prefill and decode steps of the torch executor (see
`reference_engine/executors/calibrate.py` for how times become MFU, MBU and a per-step
overhead), prints measured against predicted times, and writes a TOML profile that a config
loads with `[sim] profile = "FILE"`.
"""

from __future__ import annotations

import argparse
import platform
from pathlib import Path

from rich.console import Console
from rich.table import Table

from record.errors import ConfigError
from reference_engine.catalog import GPUS, DType, get_model
from reference_engine.config import EngineConfig, load_config, with_overrides
from reference_engine.memory import GIB, MemoryPlan


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="measure the torch executor on this device and write a sim profile")
    p.add_argument("--executor", choices=["torch"], default="torch", help="what to measure (only torch is real)")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    p.add_argument("--out", help="profile file to write (default: calibration-<device>-<model>.toml)")
    p.add_argument("--config", help="base engine config (TOML); default: built-in defaults")
    p.add_argument("--model", help="catalog model to run (default: kvgate-tiny on cpu, kvgate-small on cuda)")
    p.add_argument(
        "--dtype", choices=["fp32", "bf16", "fp16"], help="weights and KV (default: fp32 on cpu, bf16 on cuda)"
    )
    p.add_argument(
        "--gpu",
        choices=sorted(GPUS),
        help="catalog GPU the MFU/MBU are fractions of "
        "(default: the CUDA device if the catalog knows it, else the config's hardware.gpu)",
    )
    p.add_argument("--prefill", default="32,128,512,1024", help="prefill sizes in tokens, comma-separated")
    p.add_argument("--batches", default="1,2,4,8,16,32", help="decode batch sizes, comma-separated")
    p.add_argument("--context", type=int, default=256, help="context of each decoding sequence, tokens")
    p.add_argument("--repeats", type=int, default=5, help="timed repeats per point (the fastest is kept)")
    p.add_argument("--threads", type=int, help="torch.cpu_threads: CPU threads for torch (default: torch's choice)")
    p.set_defaults(func=run)


def _ints(text: str, flag: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: expected comma-separated whole numbers, e.g. 1,2,4") from None
    if not values or min(values) < 1:
        raise ConfigError(f"{flag} {text!r}: give at least one size, all ≥ 1")
    return values


def _detect_gpu(device: str) -> str | None:
    import torch

    if not device.startswith("cuda") or not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name(torch.device(device)).lower()
    for key, gpu in (("h200", "h200"), ("h100", "h100-sxm"), ("a100", "a100-80g")):
        if key in name:
            return gpu
    return None


def run(args: argparse.Namespace) -> int:
    try:
        from reference_engine.executors import calibrate as cal
        from reference_engine.executors.torch_executor import TorchExecutor
    except ImportError as err:
        raise ConfigError(f"kvgate calibrate needs the torch extra: pip install -e '.[torch]' ({err})") from None
    cuda = args.device.startswith("cuda")
    prefill, batches = _ints(args.prefill, "--prefill"), _ints(args.batches, "--batches")
    base = load_config(args.config) if args.config else EngineConfig()
    model = args.model or ("kvgate-small" if cuda else "kvgate-tiny")
    dtype = args.dtype or ("bf16" if cuda else "fp32")
    gpu = args.gpu or _detect_gpu(args.device) or base.hardware.gpu
    block_tokens = base.engine.block_tokens
    bytes_per_block = get_model(model).kv_bytes_per_token(DType(dtype)) * block_tokens
    num_blocks = cal.blocks_needed(block_tokens, prefill, batches, args.context)
    config = with_overrides(
        base,
        {
            "model.name": model,
            "model.weight_dtype": dtype,
            "model.kv_dtype": dtype,
            "hardware.gpu": gpu,
            "hardware.kv_pool_gib": (num_blocks + 0.5) * bytes_per_block / GIB,
            "engine.kv_bytes_safety": 1.0,
            "engine.executor": "torch",
            "torch.device": args.device,
            "torch.timing": "measured",
            "torch.cpu_threads": args.threads or 0,
        },
    )
    plan = MemoryPlan.from_config(config)
    console = Console()
    with console.status(f"measuring {model} ({dtype}) on {args.device}..."):
        executor = TorchExecutor(config, plan)
        points = cal.measure(executor, plan, prefill, batches, args.context, args.repeats)
    profile = cal.fit_profile(points, plan.gpu)
    meta = {
        "executor": "torch",
        "device": args.device,
        "device_name": _device_name(args.device),
        "model": model,
        "dtype": dtype,
        "block_tokens": block_tokens,
        "torch_version": _torch_version(),
        "cpu_threads": _threads(),
    }
    out = Path(args.out or f"calibration-{args.device.replace(':', '')}-{model}.toml")
    out.write_text(cal.profile_toml(profile, meta))
    _print(console, profile, out)
    return 0


def _device_name(device: str) -> str:
    import torch

    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    return platform.processor() or platform.machine()


def _torch_version() -> str:
    import torch

    return torch.__version__


def _threads() -> int:
    import torch

    return torch.get_num_threads()


def _print(console: Console, profile, out: Path) -> None:
    table = Table(title=f"torch executor steps vs the calibrated sim ({profile.gpu.name} peaks)")
    for col in ("step", "tokens", "batch", "measured ms", "sim ms"):
        table.add_column(col, justify="left" if col == "step" else "right")
    for p, pred in zip(profile.points, profile.predicted_s):
        table.add_row(p.kind, str(p.tokens), str(p.batch), f"{p.time_s * 1000:.3f}", f"{pred * 1000:.3f}")
    console.print(table)
    console.print(
        f"mfu = {profile.mfu:.4g}, mbu = {profile.mbu:.4g}, "
        f"step_overhead_ms = {profile.step_overhead_ms:.4g}; worst fit error {profile.max_rel_error:.0%}"
    )
    for note in profile.notes:
        console.print(f"note: {note}")
    console.print(
        f'wrote {out}  (use it with [sim] profile = "{out}", hardware.gpu = "{profile.gpu.name}")', markup=False
    )
