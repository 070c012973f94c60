"""The scenarios a run can name: one locustfile per scenario in `scenarios/`, named by its stem.

    discover(scenarios_dir())        {"short_qa": Scenario(path, ("ShortQA",)), ...}
    select(directory, ["cancel_storm", "short_qa"])

Files are read with `ast`, not imported: importing a locustfile imports locust, which
monkey-patches the whole process with gevent. A scenario's user classes are its top-level
classes that derive from `KvgateUser`, or from `ScheduledChaos` (a KvgateUser that sends a chaos
schedule to an admin endpoint: harness/loadgen/admin_chaos.py).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from record.errors import KvgateError, UnknownNameError

BASE_CLASSES = frozenset({"KvgateUser", "ScheduledChaos"})


@dataclass(frozen=True)
class Scenario:
    name: str
    path: Path
    user_classes: tuple[str, ...]


def scenarios_dir() -> Path:
    """The repository's scenarios/ beside this package, else ./scenarios."""
    beside = Path(__file__).resolve().parent.parent / "scenarios"
    return beside if beside.is_dir() else Path.cwd() / "scenarios"


def discover(directory: Path) -> dict[str, Scenario]:
    if not directory.is_dir():
        raise KvgateError(f"no scenarios directory at {directory}")
    found = {}
    for path in sorted(directory.glob("*.py")):
        if path.name.startswith("_"):
            continue  # locust skips these too
        tree = ast.parse(path.read_text(), filename=str(path))
        classes = tuple(
            node.name
            for node in tree.body
            if isinstance(node, ast.ClassDef)
            and any(isinstance(b, ast.Name) and b.id in BASE_CLASSES for b in node.bases)
        )
        if classes:
            found[path.stem] = Scenario(path.stem, path.resolve(), classes)
    return found


def select(directory: Path, names: Sequence[str]) -> list[Scenario]:
    """The named scenarios (all of them, in file order, when `names` is empty)."""
    catalog = discover(directory)
    for name in names:
        if name not in catalog:
            raise UnknownNameError("scenario", name, catalog)
    return [catalog[n] for n in dict.fromkeys(names)] if names else list(catalog.values())
