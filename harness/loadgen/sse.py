"""Reading an OpenAI-compatible SSE completion stream, one line at a time.

What the stream tells the harness, whatever the server: the request id (`id` of the chunks),
the first *non-empty* content delta (the role-only chunk `{"role": "assistant", "content": ""}`
does not count: TTFT is the first token a user could see), the content, the finish reason,
usage (`stream_options.include_usage`), an error event (`data: {"error": ...}`, how servers end
a stream that failed after its first byte), and kvgate's own `kvgate` object when the target is
the reference engine. Chat chunks carry `choices[0].delta.content`; text completions carry
`choices[0].text`. Lines that are not `data:` lines (comments, `event:`, blanks) are ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

DONE = b"[DONE]"


@dataclass
class StreamState:
    """What one stream has said so far. Only `feed` and `feed_body` change it."""

    chunk_id: str = ""
    first_content_s: float | None = None
    num_content_words: int = 0
    finish_reason: str = ""
    usage: dict[str, Any] | None = None
    kvgate: dict[str, Any] | None = None
    error_code: str = ""
    is_done: bool = False
    is_malformed: bool = False
    parts: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.parts)

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
        self._apply({"id": parsed.get("id"), "usage": parsed.get("usage"), "kvgate": parsed.get("kvgate"),
                     "choices": [{"text": message.get("content") or choice.get("text") or "",
                                  "finish_reason": choice.get("finish_reason")}]}, now_s)
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
        delta = choice.get("delta")
        content = (delta.get("content") if isinstance(delta, dict) else None) or choice.get("text") or ""
        if not content:
            return ""
        if self.first_content_s is None:
            self.first_content_s = now_s
        self.parts.append(content)
        self.num_content_words += len(content.split())
        return content
