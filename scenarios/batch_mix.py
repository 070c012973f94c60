"""Batch/offline work beside interactive traffic.

Three in four requests are batch jobs from the batch tenant (--kvgate-batch-prompt-tokens in,
--kvgate-batch-max-tokens out); one in four is an interactive question from an interactive
tenant. Batch work must pause at peak (pause-batch-prefill watermark, interactive reserve),
resume after it, and never starve; interactive TTFT must not suffer for it.
"""

from locust import task

from harness.loadgen.prompts import chat_prompt
from harness.loadgen.users import KvgateUser


class BatchMix(KvgateUser):
    scenario = "batch_mix"
    traffic_class = "batch"

    @task(3)
    def batch_job(self) -> None:
        s = self.settings
        self.chat(
            chat_prompt(s.batch_prompt_tokens, seed=self.seed(), system=s.system_prompt, tokens=s.tokens),
            max_tokens=s.batch_max_tokens,
        )

    @task(1)
    def interactive_question(self) -> None:
        s = self.settings
        self.chat(
            chat_prompt(s.prompt_tokens, seed=self.seed(), system=s.system_prompt, tokens=s.tokens),
            max_tokens=s.max_tokens,
            tenant=self.ctx.tenants.pick("interactive", self.index),
        )
