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

Only plugin.py, users.py and shape.py import locust (which monkey-patches the process with
gevent on import); everything else is plain Python, used by `kvgate run` and unit tests too.
docs/scenarios.md explains the scenarios and every setting.
"""
