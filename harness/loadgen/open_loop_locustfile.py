"""An open-loop load as a locustfile: each request at its intended time, from every locust process.

    locust -f harness/loadgen/open_loop_locustfile.py --headless --host URL --kvgate-rate 20 -t 20s
    locust -f harness/loadgen/open_loop_locustfile.py ... --kvgate-trace trace.jsonl --processes 2

`kvgate run --rate` / `--trace` and `kvgate sweep` run this file (docs/load.md). It only names
what locust should find; harness/loadgen/open_loop_users.py is the load itself (imported, so it
is one module however locust loads this file, here or downloaded by a `--worker -f -`).
"""

from harness.loadgen.open_loop_users import OpenLoopShape, OpenLoopUser  # noqa: F401  (locust finds them here)
