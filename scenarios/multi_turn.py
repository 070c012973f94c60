"""Multi-turn sessions with idle gaps.

Each user holds a conversation (X-Session-Id) of --kvgate-turns turns: every turn sends the
whole history, the assistant's answers included, word for word, so the engine finds the
session's KV; between turns the user is idle for --kvgate-idle-gap-min-s..max-s. A share of
sessions (--kvgate-unrebuildable-fraction) says X-Session-Rebuildable: false: when their KV was
evicted or expired they get 410 context_expired (recorded, then a new session starts); the
others are re-prefilled and say so with x-kvgate-session-rebuilt (recorded as session_rebuilt).
"""

from locust import task

from harness.loadgen.outcome import Status
from harness.loadgen.prompts import Message, next_turn
from harness.loadgen.users import KvgateUser


class MultiTurn(KvgateUser):
    scenario = "multi_turn"

    def on_start(self) -> None:
        self.new_session()

    def new_session(self) -> None:
        s = self.settings
        self.session_id = f"{self.ctx.next_request_id()}-session"
        self.rebuildable = self.rng.random() >= s.unrebuildable_fraction
        self.history: list[Message] = [{"role": "system", "content": s.system_prompt}]
        self.num_turns = 0

    def wait_time(self) -> float:
        return self.rng.uniform(self.settings.idle_gap_min_s, self.settings.idle_gap_max_s)

    @task
    def turn(self) -> None:
        s = self.settings
        prompt = next_turn(self.history, s.prompt_tokens, seed=self.seed())
        result = self.chat(prompt, max_tokens=s.max_tokens, session_id=self.session_id, rebuildable=self.rebuildable)
        if result.outcome.status != Status.OK.value:
            self.new_session()
            return
        self.history = [*prompt.messages, {"role": "assistant", "content": result.text}]
        self.num_turns += 1
        if self.num_turns >= s.turns:
            self.new_session()
