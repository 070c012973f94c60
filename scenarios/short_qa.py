"""Short Q&A: interactive tenants ask short questions behind the shared system prompt.

The everyday traffic whose TTFT the gates protect. Each request: the public system prompt
(--kvgate-system-prompt, shared across tenants) plus a fresh question, --kvgate-prompt-tokens
in all, --kvgate-max-tokens of answer.
"""

from locust import task

from harness.loadgen.prompts import chat_prompt
from harness.loadgen.users import KvgateUser


class ShortQA(KvgateUser):
    scenario = "short_qa"

    @task
    def ask(self) -> None:
        s = self.settings
        self.chat(
            chat_prompt(s.prompt_tokens, seed=self.seed(), system=s.system_prompt, tokens=s.tokens),
            max_tokens=s.max_tokens,
        )
