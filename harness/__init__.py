"""The kvgate harness: the CLI, target lifecycle, collectors, run records, replay."""
