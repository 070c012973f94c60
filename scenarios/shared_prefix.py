"""Shared prefixes: the public system prompt, then the tenant's own preamble, then a question.

Two layers of sharing: the system prompt is the engine's declared public prefix (shared by all
tenants; --kvgate-system-prompt must be its exact text), the preamble (--kvgate-tenant-prefix-
tokens words, the same for every request of a tenant, different between tenants) is shared
only within the tenant. Prefix-cache hits, tenant scoping and eviction of cached prefixes show
in the engine's events and the prefix-cache counters.
"""

from locust import task

from harness.loadgen.prompts import chat_prompt, tenant_prefix
from harness.loadgen.users import KvgateUser


class SharedPrefix(KvgateUser):
    scenario = "shared_prefix"

    @task
    def ask_about_documents(self) -> None:
        s = self.settings
        prefix = tenant_prefix(self.tenant.name, s.tenant_prefix_tokens)
        prompt = chat_prompt(s.tenant_prefix_tokens + s.prompt_tokens, seed=self.seed(), system=s.system_prompt,
                             prefix=prefix)
        self.chat(prompt, max_tokens=s.max_tokens)
