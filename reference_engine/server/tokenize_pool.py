"""Long prompts are tokenized in a process of their own, never on the event loop.

A thread would not do: tokenizing is Python code that holds the GIL, and while a thread holds it
the event loop waits up to the interpreter's switch interval (5 ms) each time it comes back from
a system call, so a burst of long prompts would slow every read, write and stream on the loop.
One worker process, forked at the first long prompt (a server that never sees one never starts
it; a fork takes milliseconds where a spawn would re-import the server for seconds), has the
engine's tokenizer and gets the prompt's text per call; the ids come back pickled, which costs
the loop a fraction of what tokenizing them would.

The process ends with the server (lifetime.py): `close` waits for it to exit (a server stopped
by SIGTERM re-raises the signal once it has shut down, and would otherwise leave before the
pool's own shutdown reached the child), it dies when its parent dies, and a fork does not
keep the server's signal handlers, which would make it ignore SIGTERM.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

from reference_engine.server.lifetime import default_stop_signals, die_with_parent
from reference_engine.tokenizer import Tokenizer

_tokenizer: Tokenizer | None = None  # the worker process's own copy


def _install(tokenizer: Tokenizer) -> None:
    global _tokenizer
    default_stop_signals()
    die_with_parent()
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
        """Stop the tokenizer process and wait until it has exited (at most one prompt's time)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
