"""One step of a chaos schedule sent to an admin endpoint: router_chaos.py and pd_chaos.py are
lists of them, admin_chaos.py the user that sends them (kept apart: a schedule imports no locust)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Body = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ChaosStep:
    name: str
    body: Body  # one call of the endpoint
