"""Long outputs: --kvgate-long-output-tokens of answer about a --kvgate-long-output-prompt-tokens
context (rewrite this report, draft from these notes).

Long contexts that grow block by block for a long time: what decode-time growth, the warn
watermark's max_tokens clamp and preemption act on; when the pool runs short they are the
victims, swapped to host memory or recomputed, whichever costs less at their length.
"""

from locust import task

from harness.loadgen.prompts import chat_prompt
from harness.loadgen.users import KvgateUser


class LongOutput(KvgateUser):
    scenario = "long_output"

    @task
    def write(self) -> None:
        s = self.settings
        self.chat(
            chat_prompt(s.long_output_prompt_tokens, seed=self.seed(), system=s.system_prompt, tokens=s.tokens),
            max_tokens=s.long_output_tokens,
        )
