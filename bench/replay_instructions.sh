#!/usr/bin/env bash
# Instructions one replay executes, counted by valgrind (cachegrind, no cache model): a figure
# that does not move with the machine's load, for comparing two checkouts on a busy machine
# where CPU seconds move by 20-40 % from run to run (docs/benchmarks.md). About 50x slower than
# the replay itself; the count includes Python's start and kvgate's imports, measured apart with
# a one-request replay and printed beside it. String hashing is seeded (PYTHONHASHSEED=0) so
# that dict and set layouts, and so the count, repeat from run to run.
#
#   bench/replay_instructions.sh CONFIG [LIMIT] [CHECKOUT]
#   bench/replay_instructions.sh configs/default.toml 600 ../old-checkout
set -euo pipefail
config=${1:?usage: $0 CONFIG [LIMIT] [CHECKOUT]}
limit=${2:-600}
checkout=$(cd "${3:-$(dirname "$0")/..}" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$here/.venv/bin/python}
trace=${TRACE:-$here/../shared/traces/mooncake_fast25/conversation_trace.jsonl}
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 2; }

count() {  # instructions of a replay of the first $1 requests
  (cd "$checkout" && PYTHONHASHSEED=0 PYTHONPATH="$checkout" valgrind --tool=cachegrind --cache-sim=no \
    --cachegrind-out-file=/dev/null "$python" - "$config" "$1" "$trace" 2>&1 <<'PY'
import sys, tempfile
from pathlib import Path
from harness.replay.loaders import load_trace
from harness.replay.run import ReplaySettings, run_replay
from reference_engine import load_config
config, limit, trace = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with tempfile.TemporaryDirectory() as tmp:
    run_replay(load_trace(trace, "auto", limit), load_config(Path(config)), ReplaySettings(), Path(tmp) / "run")
PY
  ) | awk '/I *refs/ {gsub(",", "", $4); print $4}'
}
total=$(count "$limit")
start=$(count 1)
awk -v c="$config" -v n="$limit" -v t="$total" -v s="$start" -v d="$checkout" \
  'BEGIN {printf "%s  %s requests  %.3f G instructions in the replay (%.3f G in all, %.3f G start)  %s\n", c, n, (t - s) / 1e9, t / 1e9, s / 1e9, d}'
