"""Shared prefixes: the public system prompt, then one of the tenant's documents, then a question.

Two layers of sharing: the system prompt is the engine's declared public prefix (shared by all
tenants; --kvgate-system-prompt must be its exact text); the documents are shared only within
the tenant. Each tenant has --kvgate-num-documents of them, a quarter to twice
--kvgate-document-tokens words long, asked about with Zipf popularity
(--kvgate-document-popularity): a few are hot, most are cold, and hot is not the same as long.
Which cached prefixes a policy keeps under pressure shows in the prefix-hit rate; tenant scoping
and eviction of cached prefixes show in the engine's events and the prefix-cache counters.
"""

from locust import task

from harness.loadgen.prompts import DocumentShelf, chat_prompt, count_tokens
from harness.loadgen.users import KvgateUser


class SharedPrefix(KvgateUser):
    scenario = "shared_prefix"

    def on_start(self) -> None:
        s = self.settings
        self.shelf = DocumentShelf(self.tenant.name, s.document_tokens, s.num_documents, s.document_popularity)

    @task
    def ask_about_documents(self) -> None:
        s = self.settings
        document = self.shelf.pick(self.rng)
        fixed = count_tokens(
            [{"role": "system", "content": s.system_prompt}, {"role": "user", "content": document}], s.tokens
        )
        prompt = chat_prompt(
            fixed + s.prompt_tokens, seed=self.seed(), system=s.system_prompt, prefix=document, tokens=s.tokens
        )
        self.chat(prompt, max_tokens=s.max_tokens)
