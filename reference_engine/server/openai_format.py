"""OpenAI's response shapes: SSE chunks and whole bodies for chat and text completions.

Every token passes through `content_chunk_json`, so it is built from byte templates made once per
request and the token's JSON string made once per process (`TokenPieces`): two concatenations
per chunk, no dict building, no encoding.
The templates are pinned against the `openai` client's own models in the tests.

    data: {"id":…,"object":"chat.completion.chunk",…,"choices":[{"delta":{"role":"assistant","content":""}…}]}
    data: {…"delta":{"content":"kalomi"}…}            one event per token
    data: {…"delta":{},"finish_reason":"length"}],"kvgate":{…}}
    data: {…"choices":[],"usage":{…}}                   only with stream_options.include_usage
    data: [DONE]

An error after the stream has started is one `data: {"error": {…}}` event (the shape the openai
client raises as APIError), then `data: [DONE]`. The `id` of every body and chunk *is* the
engine's request id, so a client can always name the request it saw.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii as _json_str
from typing import Literal

from record.errors import RequestError
from reference_engine.request import Request
from reference_engine.tokenizer import Tokenizer

DONE = b"data: [DONE]\n\n"
_compact = json.JSONEncoder(separators=(",", ":")).encode

Kind = Literal["chat", "text"]


def usage(r: Request) -> dict:
    return {
        "prompt_tokens": r.num_prompt_tokens,
        "completion_tokens": r.num_output_tokens,
        "total_tokens": r.num_prompt_tokens + r.num_output_tokens,
        "prompt_tokens_details": {"cached_tokens": r.num_prefix_hit_tokens},
    }


def extension(r: Request, worker: int | None) -> dict:
    """kvgate's own fields, under one key that OpenAI clients ignore."""
    return {
        "request_id": r.request_id,
        "session_id": r.session_id,
        "session_rebuilt": r.session_rebuilt,
        "max_tokens_clamped": r.max_tokens_clamped,
        "max_tokens": r.max_new_tokens,
        "approximate": r.approximate,
        "worker": worker,
    }


def models_list(model_name: str, created: int, max_model_len: int) -> dict:
    """The GET /v1/models body: the one served model."""
    return {
        "object": "list",
        "data": [
            {
                "id": model_name,
                "object": "model",
                "created": created,
                "owned_by": "kvgate",
                "max_model_len": max_model_len,
            }
        ],
    }


def error_event(err: RequestError) -> bytes:
    return b"data: " + _compact(err.to_openai()).encode() + b"\n\n"


class TokenPieces:
    """Each token's streamed text as a JSON string literal, made once per process and token.

    A stream's text is its tokens decoded one by one: the first as decoded, every later one
    with the separator the tokenizer puts between tokens (`decode([a, b]) == piece(a) + piece(b)`
    for the word tokenizer, whose separator is a space). Ids past `max_cached` distinct ones are
    encoded each time: a vocabulary is bounded, the cache is too. O(1) per token once cached.
    """

    def __init__(self, tokenizer: Tokenizer, max_cached: int = 1 << 16) -> None:
        self._decode = tokenizer.decode
        self._max_cached = max_cached
        self._first: dict[int, bytes] = {}
        self._next: dict[int, bytes] = {}

    def piece(self, token_id: int, first: bool) -> bytes:
        cache = self._first if first else self._next
        json_text = cache.get(token_id)
        if json_text is None:
            text = self._decode([token_id])
            json_text = _json_str(text if first else " " + text).encode()
            if len(cache) < self._max_cached:
                cache[token_id] = json_text
        return json_text


@dataclass(slots=True)
class ResponseFormat:
    """The byte templates of one request's response (chat or text completion)."""

    kind: Kind
    request_id: str
    model: str
    created: int
    include_usage: bool
    _head: bytes = b""
    _content_tail: bytes = b""

    def __post_init__(self) -> None:
        obj = "chat.completion.chunk" if self.kind == "chat" else "text_completion"
        self._head = (
            f'data: {{"id":{_json_str(self.request_id)},"object":"{obj}","created":{self.created},'
            f'"model":{_json_str(self.model)},"system_fingerprint":null,"choices":['
        ).encode()
        tail = '"logprobs":null,"finish_reason":null}]'
        if self.kind == "chat":
            self._head += b'{"index":0,"delta":{"content":'
            tail = "}," + tail
        else:
            self._head += b'{"index":0,"text":'
            tail = "," + tail
        self._content_tail = (tail + (',"usage":null' if self.include_usage else "") + "}\n\n").encode()

    # ------------------------------------------------------------------ stream
    def role_chunk(self) -> bytes:
        """Chat streams open with the assistant role and empty content, as OpenAI's do."""
        if self.kind != "chat":
            return b""
        return self._chunk({"role": "assistant", "content": ""}, None)

    def content_chunk(self, text: str) -> bytes:
        return self.content_chunk_json(_json_str(text).encode())

    def content_chunk_json(self, json_text: bytes) -> bytes:
        """The chunk of a text already encoded as a JSON string literal (quotes included)."""
        return self._head + json_text + self._content_tail

    def final_chunk(self, finish_reason: str, ext: dict) -> bytes:
        return self._chunk({} if self.kind == "chat" else "", finish_reason, ext)

    def usage_chunk(self, r: Request) -> bytes:
        if not self.include_usage:
            return b""
        body = self._envelope()
        body["choices"] = []
        body["usage"] = usage(r)
        return b"data: " + _compact(body).encode() + b"\n\n"

    def _envelope(self) -> dict:
        obj = "chat.completion.chunk" if self.kind == "chat" else "text_completion"
        return {
            "id": self.request_id,
            "object": obj,
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
        }

    def _chunk(self, delta: dict | str, finish_reason: str | None, ext: dict | None = None) -> bytes:
        choice: dict = {"index": 0}
        choice["delta" if self.kind == "chat" else "text"] = delta
        choice["logprobs"] = None
        choice["finish_reason"] = finish_reason
        body = self._envelope()
        body["choices"] = [choice]
        if self.include_usage:
            body["usage"] = None
        if ext is not None:
            body["kvgate"] = ext
        return b"data: " + _compact(body).encode() + b"\n\n"

    # ------------------------------------------------------------------- whole
    def body(self, text: str, finish_reason: str, r: Request, ext: dict) -> dict:
        """The non-streaming response body."""
        if self.kind == "chat":
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
            obj = "text_completion"
        return {
            "id": self.request_id,
            "object": obj,
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": [choice],
            "usage": usage(r),
            "kvgate": ext,
        }
