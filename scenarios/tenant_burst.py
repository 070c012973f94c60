"""Single-tenant burst: one tenant fires --kvgate-burst-size requests at once, again and again.

The noisy neighbour: its quota (max KV share, active sequences) must stop it with explicit 429
tenant_quota while the other tenants' traffic carries on. The tenant is --kvgate-burst-tenant,
else the last interactive tenant.
"""

from locust import task

from harness.loadgen.prompts import chat_prompt
from harness.loadgen.users import KvgateUser


class TenantBurst(KvgateUser):
    scenario = "tenant_burst"

    def on_start(self) -> None:
        name = self.settings.burst_tenant
        self.tenant = self.ctx.tenants.named(name) if name else self.ctx.tenants.of_class("interactive")[-1]

    @task
    def burst(self) -> None:
        s = self.settings
        self.at_once(
            s.burst_size,
            lambda: self.chat(
                chat_prompt(s.prompt_tokens, seed=self.seed(), system=s.system_prompt, tokens=s.tokens),
                max_tokens=s.max_tokens,
            ),
        )
