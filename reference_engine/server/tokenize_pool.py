"""Long prompts are tokenized in a process of their own, never on the event loop.

A thread would not do: tokenizing is Python code that holds the GIL, and while a thread holds it
the event loop waits up to the interpreter's switch interval (5 ms) each time it comes back from
a system call, so a burst of long prompts would slow every read, write and stream on the loop.
One worker process, forked at the first long prompt (a server that never sees one never starts
it; a fork takes milliseconds where a spawn would re-import the server for seconds), has the
engine's tokenizer and gets the prompt's text per call; the ids come back pickled, which costs
the loop a fraction of what tokenizing them would.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

from reference_engine.tokenizer import Tokenizer

_tokenizer: Tokenizer | None = None  # the worker process's own copy


def _install(tokenizer: Tokenizer) -> None:
    global _tokenizer
    _tokenizer = tokenizer


def _encode(text: str) -> list[int]:
    assert _tokenizer is not None, "the worker was started without its tokenizer"
    return _tokenizer.encode(text)


class TokenizePool:
    """One tokenizer process per server, started on first use; `close` stops it."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self._pool: ProcessPoolExecutor | None = None
        self.num_encoded = 0

    async def encode(self, text: str) -> list[int]:
        if self._pool is None:
            method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
            self._pool = ProcessPoolExecutor(
                1, mp_context=multiprocessing.get_context(method), initializer=_install, initargs=(self._tokenizer,)
            )
        self.num_encoded += 1
        return await asyncio.get_running_loop().run_in_executor(self._pool, _encode, text)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
