"""Shared helpers of the locust scenarios in `scenarios/` (one locustfile per scenario).

    settings.py          every --kvgate-* option / KVGATE_* variable (LoadSettings)
    tenants.py           tenant keys and traffic classes (name=key:class specs)
    prompts.py           chat prompts of exact token counts; shared system and tenant prefixes
    sse.py               reading an OpenAI-compatible SSE stream (TTFT at the first content)
    outcome.py           one request as the client saw it -> a requests.csv row
    exchange.py          one request start to end over a transport: the measurement core
    gevent_transport.py  the locust users' transport (geventhttpclient, cancels hang up at once)
    httpx_transport.py   the harness's own transport (the unloaded baseline probe)
    request_log.py       the CSV of rows, where the record is written; the first rejection
    ramp.py              the step-load plan (pure)
    chaos.py             worker kill: find a worker pid through /admin/workers, kill -9 it
    plugin.py            locust event hooks: options, per-process context, row forwarding
    users.py             KvgateUser, the base of every scenario's user
    shape.py             StepLoadShape, the locust adapter of ramp.py
    load_workers.py      the master's roll of the processes that send: identity, clock, lost
    clock_sync.py        a worker's clock offset to the master, NTP-style (pure)
  the open loop (docs/load.md):
    arrivals.py          arrival schedules at a rate (pure)
    schedule.py          Slot: one scheduled request, small enough for a locust message
    chat_workload.py     chat at a rate, as slots
    trace_workload.py    a request trace, as slots
    workloads.py         the workload a run's settings ask for
    dealer.py            the master deals the schedule, each slot to one sender (pure)
    sender.py            a locust process sends its slots, each at its time (gevent)
    client_lag.py        the lag of a load, and its bound
    open_loop_users.py   the locust side: one sender user per process, the shape, the dealing
    open_loop_locustfile.py  the locustfile kvgate run and plain locust load

Only plugin.py, users.py, shape.py and open_loop_users.py import locust (which monkey-patches
the process with gevent on import; sender.py and watcher.py use gevent, and run inside locust);
everything else is plain Python, used by `kvgate run` and unit tests too.
docs/scenarios.md explains the scenarios and every setting.
"""
