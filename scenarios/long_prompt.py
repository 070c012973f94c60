"""Long prompts: 32K-token documents (--kvgate-long-prompt-tokens), a short answer each.

Each prompt takes a large share of the KV pool at once and a long prefill; tenant quotas and
admission decide what happens to the second one. Needs a long-context model (the default
Llama-3.1-8B has 131,072 tokens; Llama-3-8B stops at 8,192 and answers 400
context_length_exceeded, which is recorded as such).
"""

from locust import task

from harness.loadgen.prompts import chat_prompt
from harness.loadgen.users import KvgateUser


class LongPrompt(KvgateUser):
    scenario = "long_prompt"

    @task
    def summarise(self) -> None:
        s = self.settings
        self.chat(
            chat_prompt(s.long_prompt_tokens, seed=self.seed(), system=s.system_prompt, tokens=s.tokens),
            max_tokens=s.max_tokens,
        )
