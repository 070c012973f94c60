"""Step load: ramp users until the target starts rejecting (429), hold, then stop.

StepLoad users ask short questions (like short_qa); the StepLoadShape adds --kvgate-step-users
users every --kvgate-step-s seconds up to --kvgate-step-max-users. When the first 429 comes
back it holds that level for --kvgate-step-hold-s and stops the test (also when max users is
reached without a rejection). The shape drives the run when this class is chosen
(`locust -f scenarios/step_load.py`, `locust -f scenarios/ StepLoad`, `kvgate run --scenarios
step_load`); in the mixed default these users are ordinary short-question users.
"""

from locust import task

from harness.loadgen.prompts import chat_prompt
from harness.loadgen.shape import StepLoadShape  # noqa: F401  (locust finds the shape in this module)
from harness.loadgen.users import KvgateUser


class StepLoad(KvgateUser):
    scenario = "step_load"
    uses_step_shape = True

    @task
    def ask(self) -> None:
        s = self.settings
        self.chat(
            chat_prompt(s.prompt_tokens, seed=self.seed(), system=s.system_prompt, tokens=s.tokens),
            max_tokens=s.max_tokens,
        )
