"""P/D chaos against a disaggregated target: cancels at the prefill -> decode hand-off, and a
decode pool kept under pressure.

    locust -f pd_scenarios/pd_chaos.py --host http://PROXY:8000 --headless -u 16 -t 60s --kvgate-record-dir runs/pd

Behind a P/D proxy (vLLM's disaggregated examples: the prefill request with max_tokens = 1, then
the decode request that pulls its KV) the first word a client sees marks the hand-off: the
decode side has reserved its blocks and is pulling the prompt's KV, or is about to.
`hang_up_at_handoff` hangs up just after that word, so the cancel lands mid-transfer, timed from
what the client sees; `long_answer` keeps the decode pool full with long answers to prompts worth
transferring. After the drain no request may hold blocks on either side (cancel_release on the
fleet, capacity_after_drain and memory_recovery per replica with `--replica`). On kvgate's own
P/D pair the cancel is timed to the transfer itself, which only the engine sees
(scenarios/pd_transfer_chaos.py, POST /admin/pd/chaos).

It lives outside scenarios/ (locust reads every .py below a directory it is given, so a
subdirectory would join the default mix of every config): run it by path.
"""

from locust import task

from harness.loadgen.exchange import Cancel
from harness.loadgen.prompts import chat_prompt
from harness.loadgen.users import KvgateUser


class PdChaos(KvgateUser):
    scenario = "pd_chaos"

    @task(3)
    def hang_up_at_handoff(self) -> None:
        s = self.settings
        self.chat(
            chat_prompt(s.cancel_prompt_tokens, seed=self.seed(), system=s.system_prompt, tokens=s.tokens),
            max_tokens=s.cancel_max_tokens,
            cancel=Cancel(after_words=1),
        )

    @task(1)
    def long_answer(self) -> None:
        s = self.settings
        self.chat(
            chat_prompt(s.long_output_prompt_tokens, seed=self.seed(), system=s.system_prompt, tokens=s.tokens),
            max_tokens=s.long_output_tokens,
        )
