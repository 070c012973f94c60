"""Collectors of a live run: what the target says about itself while the scenarios drive it.

    admin.py       the reference engine's /admin API (events, snapshot, ledger, config, workers)
    events.py      engine events by cursor, re-timed to the run's clock
    snapshot.py    usage samples and per-tenant samples from /admin/snapshot
    prometheus.py  a /metrics scraper for kvgate's, vLLM's and SGLang's metric names
    gpu.py         GPU memory through pynvml, or a clean "unavailable"
    periodic.py    a background thread that calls a function at a fixed interval
    live.py        all of them for one run: threads, signals, the final state after the drain

Every collector degrades to "absent", never to zero: a target without an admin API (vLLM,
SGLang) yields no engine events or samples and `meta.signals` says so.
"""
