"""Loading, overriding and fingerprinting configs.

`load_config` turns a TOML file into a validated `EngineConfig`; a bad file raises `ConfigError`
naming the file, the key, the value and what is allowed. A file may start from another one
(`extends = "default.toml"`, a path relative to it) and change only what differs: tables merge
key by key, anything else (a value, an array, an array of tables) replaces the parent's. So a
policy config or a broken config says what it changes, and one tenant population serves them all.
A `.json` file holds the same tables:
it is what `save_config` writes, so a harness can start `kvgate serve` with a config it changed
(`with_overrides`) and keep, beside the run, exactly what the engine ran. `config_digest` is a stable short hash
of the *validated* config (defaults included, secrets left out), so two files that mean the same
thing share a digest and a run can name exactly what it ran.
"""

from __future__ import annotations

import copy
import hashlib
import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from record.errors import ConfigError
from reference_engine.config.engine_config import EngineConfig
from reference_engine.config.redaction import digest_form, is_secret_field, redacted


def _format_validation_error(source: str, data: Mapping[str, Any], err: ValidationError) -> str:
    lines = [f"{source}: invalid config"]
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"])
        value: Any = data
        for part in e["loc"]:
            value = value.get(part, None) if isinstance(value, Mapping) else None
        # a value is shown when it is one value: never a whole table (which may hold keys), never a secret
        shown = (
            f" = {value!r}"
            if value is not None
            and not isinstance(value, Mapping)
            and e["type"] != "extra_forbidden"
            and not is_secret_field(e["loc"])
            else ""
        )
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown key (a typo?); remove it or check the name in docs/config.md"
        lines.append(f"  {key or '(top level)'}{shown}: {msg}")
    return "\n".join(lines)


def parse_config(data: Mapping[str, Any], source: str = "<config>") -> EngineConfig:
    try:
        return EngineConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_validation_error(source, data, err)) from None


EXTENDS_KEY = "extends"


def load_config(path: str | Path) -> EngineConfig:
    """A TOML config file (or a `.json` one, as `save_config` writes it), validated, with the
    files it `extends` merged under it."""
    return parse_config(_read_tables(Path(path), ()), str(path))


def _read_tables(path: Path, chain: tuple[Path, ...]) -> dict[str, Any]:
    """The raw tables of `path` merged over those of the file it extends (`chain`: the files
    that extend this one, to refuse a cycle)."""
    is_json = path.suffix == ".json"
    try:
        text = path.read_text()
        data = json.loads(text) if is_json else tomllib.loads(text)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file" + (f" (extended by {chain[-1]})" if chain else "")) from None
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as err:
        raise ConfigError(f"{path}: not valid {'JSON' if is_json else 'TOML'}: {err}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config is a table of tables, not {type(data).__name__}")
    parent = data.pop(EXTENDS_KEY, None)
    if parent is None:
        return data
    if not isinstance(parent, str) or not parent:
        raise ConfigError(f'{path}: {EXTENDS_KEY} is the path of another config file, e.g. "default.toml"')
    parent_path = (path.parent / parent).resolve()
    if parent_path in (*chain, path.resolve()):
        raise ConfigError(f"{path}: {EXTENDS_KEY} = {parent!r} makes a cycle")
    return _merged(_read_tables(parent_path, (*chain, path.resolve())), data)


def _merged(base: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `changes` applied: tables merge key by key, anything else replaces."""
    out = dict(base)
    for key, value in changes.items():
        old = out.get(key)
        out[key] = _merged(old, value) if isinstance(old, Mapping) and isinstance(value, Mapping) else value
    return out


def save_config(config: EngineConfig, path: str | Path, *, redact: bool = False) -> Path:
    """Write the validated config (defaults included) as JSON that `load_config` reads back
    to the same digest. JSON, not TOML: the standard library writes it, and it is a record of
    what ran, not a file people edit. `redact`: secrets replaced (redaction.py), for a file that
    leaves the process, such as a run record's copy."""
    path = Path(path)
    data = redacted(config) if redact else config.model_dump(mode="json")
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return path


def with_overrides(config: EngineConfig, overrides: Mapping[str, Any]) -> EngineConfig:
    """A copy of `config` with dotted keys replaced, validated again: {"kv_cache.policy": "none"}."""
    data = copy.deepcopy(config.model_dump(mode="json"))
    for dotted, value in overrides.items():
        node = data
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return parse_config(data, "<overrides>")


def config_digest(config: EngineConfig) -> str:
    """sha256 of the canonical JSON of the validated config without its secrets
    (`redaction.digest_form`), first 16 hex digits."""
    canonical = json.dumps(digest_form(config), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
