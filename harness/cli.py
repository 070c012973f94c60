"""`kvgate`: the command line. One module per command in `harness/commands/`.

Each command module exposes `register(subparsers)` which adds its parser and sets
`func=run` where `run(args) -> int` returns the exit code. Exit codes are shared by all
commands: 0 success / all gates passed, 1 a gate failed, 2 a harness or usage error (said in
one line on stderr).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import NoReturn

from record.errors import KvgateError

EXIT_OK, EXIT_GATE_FAILED, EXIT_HARNESS_ERROR = 0, 1, 2

# Command modules, in the order `kvgate --help` lists them (`baselines` is `kvgate baseline`).
COMMANDS = (
    "demo",
    "serve",
    "run",
    "sweep",
    "worker",
    "matrix",
    "replay",
    "gate",
    "baselines",
    "report",
    "calibrate",
    "watch",
)


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error said in one line (exit 2), as every other harness error."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_HARNESS_ERROR, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kvgate", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"harness.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except KvgateError as err:
        print(f"kvgate: {err}", file=sys.stderr)
        return EXIT_HARNESS_ERROR
    except KeyboardInterrupt:
        print("kvgate: interrupted", file=sys.stderr)
        return EXIT_HARNESS_ERROR


if __name__ == "__main__":
    sys.exit(main())
