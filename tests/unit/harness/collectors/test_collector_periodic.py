from __future__ import annotations

import threading

import pytest

from harness.collectors.periodic import Periodic


def test_it_calls_repeatedly_and_once_more_when_stopped() -> None:
    calls, enough = [], threading.Event()

    def tick() -> None:
        calls.append(1)
        if len(calls) >= 3:
            enough.set()

    p = Periodic("tick", 0.001, tick).start()
    enough.wait()
    p.stop()
    assert p.num_calls == len(calls) >= 4 and p.num_errors == 0


def test_an_error_is_counted_and_the_thread_goes_on() -> None:
    calls, enough = [], threading.Event()

    def failing() -> None:
        calls.append(1)
        if len(calls) >= 3:
            enough.set()
        raise ValueError("scrape failed")

    p = Periodic("failing", 0.001, failing).start()
    enough.wait()
    p.stop(final_call=False)
    assert p.num_errors == p.num_calls >= 3 and p.last_error == "ValueError: scrape failed"


def test_the_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        Periodic("x", 0, lambda: None)
