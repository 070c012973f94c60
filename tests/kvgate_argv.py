"""Command lines written outside Python (action.yml, deploy/) checked against kvgate's own parser.

    accepts(["run", "--target", "http://t", "--profile", "quick"])   # the parsed Namespace

`AWAITED` names the options and commands those files already use that arrive with work not yet
on this branch: a command line with one of them parses once it is stripped, and as it is once
kvgate has it. Empty this table when they have landed.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from harness.cli import build_parser

AWAITED_COMMANDS: dict[str, str] = {}
AWAITED_OPTIONS: dict[str, str] = {}


def subcommands() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def options_of(command: str) -> set[str]:
    return set(subcommands()[command]._option_string_actions)


def accepts(argv: Sequence[str]) -> argparse.Namespace | None:
    """kvgate's parse of `argv` (SystemExit when it refuses it); None for an awaited command."""
    command = argv[0]
    if command not in subcommands():
        assert command in AWAITED_COMMANDS, f"kvgate has no command {command!r}"
        return None
    known = options_of(command)
    kept: list[str] = []
    skipping = False
    for arg in argv:
        option = arg.split("=", 1)[0]
        if option.startswith("--"):
            skipping = option not in known and option in AWAITED_OPTIONS
            if skipping:
                continue
        elif skipping:
            continue  # a value of an awaited option
        kept.append(arg)
    return build_parser().parse_args(kept)
