"""Render docs/config.md from the config models, so the reference never drifts from the code.

    .venv/bin/python -m reference_engine.config.doc > docs/config.md

A test compares the file with this output.
"""

from __future__ import annotations

import json
from enum import Enum

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from reference_engine.config.engine_config import EngineConfig, PublicPrefix, TenantConfig

_INTRO = """\
# Configuration reference

Engine configs are TOML files validated by `reference_engine/config/` (pydantic). Unknown keys
are errors, so a typo never silently becomes a default; a bad value fails with the key, the value
and the allowed range. Key names follow common usage where there is one
([background.md](background.md) says where each default comes from). Every run names
the config digest it ran (a stable hash of the validated config, defaults included) so that a
failed gate can name what to roll back to. `configs/default.toml` is the default; one file per
policy lives beside it.

A config may start from another and say only what it changes: `extends = "default.toml"` at the
top (a path relative to the file). Tables merge key by key; a value, an array or an array of
tables replaces the parent's. Every policy config, baseline and broken config extends
`configs/default.toml`, so they share one model, one GPU and one tenant population, and each
reads as what makes it different. The digest is of the merged, validated config: a file that
extends another and one that spells everything out share a digest when they mean the same.

This page is generated: `python -m reference_engine.config.doc > docs/config.md`.
"""


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "(required)"
    d = field.default
    if isinstance(d, Enum):
        d = d.value
    return "—" if d is None else f"`{json.dumps(d)}`"


def _allowed(field: FieldInfo) -> str:
    out = []
    for m in field.metadata:
        for attr, sym in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            v = getattr(m, attr, None)
            if v is not None:
                out.append(f"{sym} {v}")
        if getattr(m, "pattern", None):
            out.append(f"`{m.pattern}`")
    return ", ".join(out)


def _table(title: str, model: type[BaseModel]) -> list[str]:
    rows = [
        f"| `{name}` | {_default(f)} | {_allowed(f)} | {f.description or ''} |"
        for name, f in model.model_fields.items()
        if not (isinstance(f.default, BaseModel))
    ]
    doc = " ".join(line.strip() for line in (model.__doc__ or "").strip().split("\n\n")[0].splitlines())
    out = [f"## `[{title}]`", ""]
    if doc:
        out += [doc, ""]
    return out + ["| key | default | allowed | meaning |", "|---|---|---|---|", *rows, ""]


def _sections(model: type[BaseModel], prefix: str = "") -> list[str]:
    out: list[str] = []
    for name, f in model.model_fields.items():
        if isinstance(f.default, BaseModel):
            sub = type(f.default)
            out += _table(prefix + name, sub)
            out += _sections(sub, prefix + name + ".")
    return out


def render() -> str:
    lines = [_INTRO, *_sections(EngineConfig)]
    lines += _table("tenants.<name>", TenantConfig)
    lines += _table("[prefix_cache.public_prefixes]", PublicPrefix)
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    print(render(), end="")
