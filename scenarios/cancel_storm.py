"""Cancel storm: clients hang up mid-prefill and mid-decode, in turn.

Mid-prefill: a --kvgate-cancel-prompt-tokens prompt, hung up --kvgate-cancel-prefill-ms after
sending (before its first token, when the prefill takes longer than that). Mid-decode: hung up
after --kvgate-cancel-decode-words words of answer. Every such request is recorded with status
`cancelled` and cancel_intended (not a failure); the engine's cancel_received/blocks_released
events time the release, and after the run no request may still hold blocks.
"""

from locust import task

from harness.loadgen.exchange import Cancel
from harness.loadgen.prompts import chat_prompt
from harness.loadgen.users import KvgateUser


class CancelStorm(KvgateUser):
    scenario = "cancel_storm"

    @task
    def hang_up_during_prefill(self) -> None:
        s = self.settings
        self.chat(
            chat_prompt(s.cancel_prompt_tokens, seed=self.seed(), system=s.system_prompt, tokens=s.tokens),
            max_tokens=s.cancel_max_tokens,
            cancel=Cancel(after_s=s.cancel_prefill_ms / 1000),
        )

    @task
    def hang_up_during_decode(self) -> None:
        s = self.settings
        self.chat(
            chat_prompt(s.prompt_tokens, seed=self.seed(), system=s.system_prompt, tokens=s.tokens),
            max_tokens=s.cancel_max_tokens,
            cancel=Cancel(after_words=s.cancel_decode_words),
        )
