"""Collectors of a live run: what the target says about itself while the scenarios drive it.

    admin.py       the reference engine's /admin API (events, snapshot, ledger, config, workers)
    events.py      engine events by cursor, re-timed to the run's clock
    snapshot.py    usage samples and per-tenant samples from /admin/snapshot
    prometheus.py  a /metrics scraper for kvgate's, vLLM's, SGLang's and llama.cpp's metric names
    llamacpp_slots.py   llama.cpp's KV occupancy from GET /slots
    kv_events.py   vLLM's KV cache events over ZMQ: blocks stored, removed, stored again
    prefix_cache.py     the prefix-cache reset (cold start, leak check) and the cache_salt probe
    target_telemetry.py all of the above for a target without the admin API, with their statuses
    gpu.py         GPU memory through pynvml, or a clean "unavailable"
    periodic.py    a background thread that calls a function at a fixed interval
    live.py        all of them for one run: threads, signals, the final state after the drain

Every collector degrades to "absent", never to zero: a target without an admin API (vLLM,
SGLang, llama.cpp) yields no engine events or samples and `meta.signals` says so; what it
gives from outside instead, and why a source gave nothing, is in `meta.collectors`
(docs/targets.md).
"""
