"""Reading an OpenAI-compatible SSE completion stream, one line at a time.

What the stream tells the harness, whatever the server: the request id (`id` of the chunks),
the first *non-empty* output delta — content, reasoning (`reasoning_content`, vLLM's and
DeepSeek's name, or `reasoning`) or a tool call: the first token the model produced (the
role-only chunk `{"role": "assistant", "content": ""}` does not count) — the content, the
finish reason, usage (`stream_options.include_usage`), an error event (`data: {"error": ...}`, how servers end
a stream that failed after its first byte), and kvgate's own `kvgate` object when the target is
the reference engine. Chat chunks carry `choices[0].delta.content`; text completions carry
`choices[0].text`. Lines that are not `data:` lines (comments, `event:`, blanks) are ignored.

A stream that said nothing is not an answer: `is_empty` once it ended without any output
delta, and `is_malformed` stays set once one `data:` line was not a JSON object, whatever came
after it (a `[DONE]` after broken chunks does not mend them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

DONE = b"[DONE]"
REASONING_KEYS = ("reasoning_content", "reasoning")
"""Where servers put a reasoning model's thinking in a delta: output, though not the answer."""


@dataclass
class StreamState:
    """What one stream has said so far. Only `feed` and `feed_body` change it."""

    chunk_id: str = ""
    first_content_s: float | None = None
    """When the first output delta (content, reasoning or tool call) arrived."""
    num_content_words: int = 0
    finish_reason: str = ""
    usage: dict[str, Any] | None = None
    kvgate: dict[str, Any] | None = None
    error_code: str = ""
    is_done: bool = False
    is_malformed: bool = False
    parts: list[str] = field(default_factory=list)
    num_output_deltas: int = 0

    @property
    def text(self) -> str:
        return "".join(self.parts)

    @property
    def is_empty(self) -> bool:
        """No content, reasoning or tool-call delta arrived: the stream answered nothing."""
        return self.num_output_deltas == 0

    def feed(self, line: bytes, now_s: float) -> str:
        """Apply one line received at `now_s`; returns the content it carried ('' if none)."""
        line = line.strip()
        if not line.startswith(b"data:"):
            return ""
        payload = line[5:].strip()
        if payload == DONE:
            self.is_done = True
            return ""
        try:
            chunk = json.loads(payload)
        except ValueError:
            self.is_malformed = True
            return ""
        if not isinstance(chunk, dict):
            self.is_malformed = True
            return ""
        return self._apply(chunk, now_s)

    def feed_body(self, body: bytes, now_s: float) -> bool:
        """A whole non-streaming completion body received at `now_s`; False if it has no choices."""
        try:
            parsed = json.loads(body)
            choice = parsed["choices"][0]
            message = choice.get("message") or {}
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            self.is_malformed = True
            return False
        delta = {**message, "content": message.get("content") or choice.get("text") or ""}
        self._apply(
            {
                "id": parsed.get("id"),
                "usage": parsed.get("usage"),
                "kvgate": parsed.get("kvgate"),
                "choices": [{"delta": delta, "finish_reason": choice.get("finish_reason")}],
            },
            now_s,
        )
        self.is_done = True
        return True

    def _apply(self, chunk: dict[str, Any], now_s: float) -> str:
        if "error" in chunk:
            err = chunk["error"] if isinstance(chunk["error"], dict) else {}
            self.error_code = str(err.get("code") or err.get("type") or "stream_error")
            return ""
        self.chunk_id = self.chunk_id or str(chunk.get("id") or "")
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        if isinstance(chunk.get("kvgate"), dict):
            self.kvgate = chunk["kvgate"]
        choices = chunk.get("choices") or []
        if not choices:
            return ""
        choice = choices[0]
        if choice.get("finish_reason"):
            self.finish_reason = str(choice["finish_reason"])
        delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
        content = delta.get("content") or choice.get("text") or ""
        if content or delta.get("tool_calls") or any(delta.get(key) for key in REASONING_KEYS):
            self.num_output_deltas += 1
            if self.first_content_s is None:
                self.first_content_s = now_s
        if not content:
            return ""
        self.parts.append(content)
        self.num_content_words += len(content.split())
        return content
