"""Long outputs: short questions with --kvgate-long-output-tokens of answer.

Sequences that grow block by block for a long time: what decode-time growth, the warn
watermark's max_tokens clamp and preemption act on.
"""

from locust import task

from harness.loadgen.prompts import chat_prompt
from harness.loadgen.users import KvgateUser


class LongOutput(KvgateUser):
    scenario = "long_output"

    @task
    def write(self) -> None:
        s = self.settings
        self.chat(chat_prompt(s.prompt_tokens, seed=self.seed(), system=s.system_prompt),
                  max_tokens=s.long_output_tokens)
