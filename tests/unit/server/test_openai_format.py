"""The SSE chunks and bodies parse as the `openai` client's own models, byte templates included."""

import json

from openai.types import Completion
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from record.errors import CapacityError
from reference_engine.config import TrafficClass
from reference_engine.request import FinishReason, Request
from reference_engine.server.openai_format import DONE, ResponseFormat, TokenPieces, error_event, extension
from reference_engine.tokenizer import WordTokenizer


def finished_request(output: list[int]) -> Request:
    r = Request(
        request_id="chatcmpl-x-1",
        tenant="acme",
        traffic_class=TrafficClass.INTERACTIVE,
        num_prompt_tokens=7,
        max_new_tokens=len(output),
        arrival_s=0.0,
    )
    r.output_token_ids = output
    r.num_prefix_hit_tokens = 4
    r.finish_reason = FinishReason.LENGTH
    return r


def events(raw: bytes) -> list[str]:
    out = [part for part in raw.decode().split("\n\n") if part]
    assert all(p.startswith("data: ") for p in out)
    return [p[len("data: ") :] for p in out]


def test_chat_stream_chunks_are_openai_chunks_with_the_request_id():
    fmt = ResponseFormat("chat", "chatcmpl-x-1", "m", 1700000000, include_usage=True)
    r = finished_request([5, 6])
    raw = (
        fmt.role_chunk()
        + fmt.content_chunk('say "hi"\n')
        + fmt.content_chunk(" more")
        + fmt.final_chunk("length", extension(r, None))
        + fmt.usage_chunk(r)
        + DONE
    )
    *chunks, done = events(raw)
    assert done == "[DONE]"
    parsed = [ChatCompletionChunk.model_validate_json(c) for c in chunks]
    assert {c.id for c in parsed} == {"chatcmpl-x-1"}
    assert parsed[0].choices[0].delta.role == "assistant" and parsed[0].choices[0].delta.content == ""
    assert "".join(c.choices[0].delta.content or "" for c in parsed if c.choices) == 'say "hi"\n more'
    assert parsed[3].choices[0].finish_reason == "length"
    assert parsed[3].model_extra["kvgate"]["request_id"] == "chatcmpl-x-1"
    assert parsed[4].choices == [] and parsed[4].usage.completion_tokens == 2
    assert parsed[4].usage.prompt_tokens_details.cached_tokens == 4
    assert all(c.usage is None for c in parsed[:4])


def test_text_stream_chunks_have_no_role_chunk_and_no_usage_unless_asked():
    fmt = ResponseFormat("text", "cmpl-x-2", "m", 1, include_usage=False)
    assert fmt.role_chunk() == b"" and fmt.usage_chunk(finished_request([1])) == b""
    [chunk] = events(fmt.content_chunk("abc"))
    assert json.loads(chunk) == {
        "id": "cmpl-x-2",
        "object": "text_completion",
        "created": 1,
        "model": "m",
        "system_fingerprint": None,
        "choices": [{"index": 0, "text": "abc", "logprobs": None, "finish_reason": None}],
    }


def test_whole_bodies_parse_as_openai_responses():
    r = finished_request([5, 6, 7])
    chat = ResponseFormat("chat", r.request_id, "m", 1, False).body("a b c", "length", r, extension(r, 3))
    parsed = ChatCompletion.model_validate(chat)
    assert parsed.choices[0].message.content == "a b c" and parsed.usage.total_tokens == 10
    assert parsed.model_extra["kvgate"]["worker"] == 3
    text = ResponseFormat("text", r.request_id, "m", 1, False).body("a b c", "stop", r, extension(r, None))
    assert Completion.model_validate(text).choices[0].finish_reason == "stop"


def test_error_event_is_the_shape_the_openai_client_raises():
    [payload] = events(error_event(CapacityError("full", code="kv_capacity")))
    assert json.loads(payload) == {
        "error": {"message": "full", "type": "rate_limit_error", "param": None, "code": "kv_capacity"}
    }


def test_token_pieces_stream_the_very_text_that_decode_gives():
    tokenizer, ids = WordTokenizer(), [7, 300, 4095, 10**6, 7]
    pieces = TokenPieces(tokenizer, max_cached=2)  # past the cap: encoded each time, same bytes
    streamed = "".join(json.loads(pieces.piece(t, i == 0)) for i, t in enumerate(ids))
    assert streamed == tokenizer.decode(ids)
    fmt = ResponseFormat("chat", "chatcmpl-x-1", "m", 0, False)
    chunk = ChatCompletionChunk.model_validate_json(fmt.content_chunk_json(pieces.piece(300, False))[6:])
    assert chunk.choices[0].delta.content == " " + tokenizer.decode([300])
