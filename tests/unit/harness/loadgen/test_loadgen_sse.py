from __future__ import annotations

import json

from harness.loadgen.sse import StreamState


def chunk(delta: dict | None = None, *, finish: str | None = None, **extra) -> bytes:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return b"data: " + json.dumps({"id": "chatcmpl-7", "choices": choices, **extra}).encode() + b"\n"


def test_the_role_only_chunk_is_not_the_first_token() -> None:
    s = StreamState()
    s.feed(chunk({"role": "assistant", "content": ""}), 1.0)
    assert s.first_content_s is None
    s.feed(b"\n", 1.5)
    s.feed(chunk({"content": "kaloan"}), 2.0)
    s.feed(chunk({"content": " mipe nu"}), 3.0)
    assert s.first_content_s == 2.0 and s.text == "kaloan mipe nu" and s.num_content_words == 3
    assert s.chunk_id == "chatcmpl-7"


def test_finish_usage_kvgate_and_done_are_read() -> None:
    s = StreamState()
    s.feed(chunk({}, finish="length", kvgate={"session_rebuilt": True, "worker": 1}), 1.0)
    s.feed(chunk(usage={"prompt_tokens": 9, "completion_tokens": 4}), 1.0)
    s.feed(b"data: [DONE]\n", 1.0)
    assert (s.finish_reason, s.usage["completion_tokens"], s.kvgate["worker"], s.is_done) == ("length", 4, 1, True)


def test_an_error_event_is_kept_with_its_code() -> None:
    s = StreamState()
    s.feed(b'data: {"error": {"message": "worker 1 died", "type": "server_error", "code": "worker_lost"}}\n', 1.0)
    assert s.error_code == "worker_lost"


def test_text_completions_and_non_data_lines() -> None:
    s = StreamState()
    s.feed(b": keep-alive\n", 0.5)
    s.feed(b"event: message\n", 0.5)
    s.feed(b'data: {"id": "cmpl-1", "choices": [{"text": "hello", "finish_reason": null}]}\n', 1.0)
    assert s.first_content_s == 1.0 and s.text == "hello"


def test_malformed_data_is_flagged_not_raised() -> None:
    s = StreamState()
    s.feed(b"data: {not json\n", 1.0)
    s.feed(b"data: [1, 2]\n", 1.0)
    assert s.is_malformed and s.first_content_s is None


def test_a_whole_non_streaming_body() -> None:
    s = StreamState()
    body = {
        "id": "x",
        "choices": [{"message": {"role": "assistant", "content": "a b c"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3},
    }
    assert s.feed_body(json.dumps(body).encode(), 2.0)
    assert (s.first_content_s, s.text, s.finish_reason, s.is_done) == (2.0, "a b c", "stop", True)
    assert not StreamState().feed_body(b'{"object": "list"}', 1.0)
