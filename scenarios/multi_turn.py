"""Multi-turn sessions with idle gaps, more of them than the pool can keep.

Each user holds a conversation (X-Session-Id) about a document: the first turn sends it
(--kvgate-session-context-tokens words), every turn sends the whole history back, the
assistant's answers included, word for word, so the engine finds the session's KV; between
turns the user is idle for --kvgate-idle-gap-min-s..max-s. A share of sessions is long
(--kvgate-long-session-fraction: a --kvgate-long-session-context-tokens document and twice the
turns): the few long sessions among many short ones that multi_queue keeps apart. With enough
users the idle sessions outgrow the pool: the evict rung must choose whose context goes, and a
returning user finds it kept (a prefix hit) or rebuilt.

A share of sessions (--kvgate-unrebuildable-fraction) says X-Session-Rebuildable: false: when
their KV was evicted or expired they get 410 context_expired (recorded, then a new session
starts); the others are re-prefilled and say so with x-kvgate-session-rebuilt (recorded as
session_rebuilt).
"""

from locust import task

from harness.loadgen.outcome import Status
from harness.loadgen.prompts import Message, next_turn, words
from harness.loadgen.users import KvgateUser


class MultiTurn(KvgateUser):
    scenario = "multi_turn"

    def on_start(self) -> None:
        self.new_session()

    def new_session(self) -> None:
        s = self.settings
        self.session_id = f"{self.ctx.next_request_id()}-session"
        self.rebuildable = self.rng.random() >= s.unrebuildable_fraction
        is_long = self.rng.random() < s.long_session_fraction
        self.max_turns = 2 * s.turns if is_long else s.turns
        document = words(s.long_session_context_tokens if is_long else s.session_context_tokens, self.seed())
        self.history: list[Message] = [{"role": "system", "content": s.system_prompt}]
        if document:
            self.history.append({"role": "user", "content": document})
        self.num_turns = 0

    def wait_time(self) -> float:
        return self.rng.uniform(self.settings.idle_gap_min_s, self.settings.idle_gap_max_s)

    @task
    def turn(self) -> None:
        s = self.settings
        prompt = next_turn(self.history, s.prompt_tokens, seed=self.seed(), tokens=s.tokens)
        result = self.chat(prompt, max_tokens=s.max_tokens, session_id=self.session_id, rebuildable=self.rebuildable)
        if result.outcome.status != Status.OK.value:
            self.new_session()
            return
        self.history = [*prompt.messages, {"role": "assistant", "content": result.text}]
        self.num_turns += 1
        if self.num_turns >= self.max_turns:
            self.new_session()
