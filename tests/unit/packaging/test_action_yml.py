"""action.yml, the workflow that uses it and the example in docs/ci.md: what GitHub would only
find out on a runner. Every input used is declared, every step output read exists, no input is
spliced into a script, and the gate step's script, run here with a stand-in for kvgate, builds
command lines kvgate's own parser accepts, with every key in the environment and none in argv.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kvgate_argv import accepts

ROOT = Path(__file__).resolve().parents[3]
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
STEPS: list[dict[str, Any]] = ACTION["runs"]["steps"]
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")

TENANTS = "acme=sk-acme-secret:interactive,me=a:b:batch"
ADMIN_KEY = "sk-admin-secret"


def _expressions(node: Any) -> list[str]:
    """Every `${{ ... }}` expression anywhere under `node`."""
    if isinstance(node, dict):
        return [e for k, v in node.items() for e in _expressions(k) + _expressions(v)]
    if isinstance(node, list):
        return [e for v in node for e in _expressions(v)]
    return EXPRESSION.findall(node) if isinstance(node, str) else []


def _step(step_id: str) -> dict[str, Any]:
    return next(s for s in STEPS if s.get("id") == step_id)


def test_every_input_used_is_declared_and_every_declared_input_used() -> None:
    used = {m for e in _expressions(ACTION) for m in re.findall(r"\binputs\.([\w-]+)", e)}
    assert used == set(ACTION["inputs"])


def test_every_step_output_read_is_written_by_that_step() -> None:
    ids = {s["id"] for s in STEPS if "id" in s}
    for ref in {m for e in _expressions(ACTION) for m in re.findall(r"\bsteps\.([\w-]+)\.outputs\.([\w-]+)", e)}:
        step_id, output = ref
        assert step_id in ids
        if "run" in _step(step_id):  # a script writes its outputs as NAME=VALUE to $GITHUB_OUTPUT
            assert re.search(rf'echo "{output}=', _step(step_id)["run"]), ref


def test_no_expression_is_spliced_into_a_script() -> None:
    """Inputs reach the scripts through env: only; `${{ }}` inside `run:` would make them shell."""
    for step in STEPS:
        assert "${{" not in step.get("run", ""), step.get("name")


def test_actions_used_are_pinned_to_a_version() -> None:
    for step in STEPS:
        if "uses" in step:
            assert re.fullmatch(r"[\w-]+/[\w-]+@v\d+", step["uses"]), step["uses"]


def test_keys_reach_the_gate_only_through_the_environment() -> None:
    env = _step("gate")["env"]
    assert env["KVGATE_TENANTS"] == "${{ inputs.tenants }}"
    assert env["KVGATE_ADMIN_KEY"] == "${{ inputs.admin-key }}"


# -- the gate step's script, run with a stand-in for kvgate -----------------------------------


def _fake_kvgate(directory: Path, exit_code: int) -> Path:
    """A `kvgate` that writes its argv and the KVGATE_* part of its environment, then exits."""
    script = directory / "kvgate"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        "env = {k: v for k, v in os.environ.items() if k.startswith('KVGATE_')}\n"
        f"open({str(directory / 'call.json')!r}, 'w').write(json.dumps({{'argv': sys.argv[1:], 'env': env}}))\n"
        f"sys.exit({exit_code})\n"
    )
    script.chmod(0o755)
    return script


def _step_env(step: dict[str, Any], inputs: dict[str, str], context: dict[str, str]) -> dict[str, str]:
    """The step's env: block evaluated as the runner would, for these inputs."""
    given = {name: inputs.get(name, spec.get("default", "")) for name, spec in ACTION["inputs"].items()}
    env = {}
    for name, value in step.get("env", {}).items():
        (expression,) = EXPRESSION.fullmatch(value).groups()  # type: ignore[union-attr]
        scope, _, key = expression.partition(".")
        env[name] = given[key] if scope == "inputs" else context[expression]
    return env


def _run_step(step_id: str, inputs: dict[str, str], tmp_path: Path, exit_code: int = 0) -> dict[str, Any]:
    kvgate = _fake_kvgate(tmp_path, exit_code)
    outputs = tmp_path / "outputs"
    context = {"github.action_path": str(ROOT), "steps.install.outputs.kvgate": str(kvgate)}
    env = {
        "PATH": os.environ["PATH"],
        "GITHUB_OUTPUT": str(outputs),
        **_step_env(_step(step_id), inputs, context),
    }
    done = subprocess.run(
        ["bash", "-c", _step(step_id)["run"]], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=30
    )
    written = dict(line.split("=", 1) for line in outputs.read_text().splitlines()) if outputs.exists() else {}
    call = json.loads((tmp_path / "call.json").read_text()) if (tmp_path / "call.json").exists() else None
    return {"returncode": done.returncode, "stdout": done.stdout, "outputs": written, "call": call}


def test_a_target_run_passes_every_option_and_no_key_on_the_command_line(tmp_path: Path) -> None:
    inputs = {
        "target": "http://gateway:8000",
        "model": "gemma-3-270m",
        "replicas": "http://a:8000,kv-events=tcp://a:5557\n\nhttp://b:8000,name=b\n",
        "scenarios": "cancel_storm,tenant_burst",
        "thresholds": "gates.toml",
        "profile": "quick",
        "tenants": TENANTS,
        "admin-key": ADMIN_KEY,
        "args": "--require prefix_isolation  --allow-partial",
    }
    result = _run_step("gate", inputs, tmp_path)
    assert result["returncode"] == 0
    assert result["outputs"] == {"out": "runs/kvgate", "exit-code": "0", "verdict": "pass"}
    argv, env = result["call"]["argv"], result["call"]["env"]
    args = accepts(argv)
    assert args is not None and args.command == "run"
    assert (args.target, args.model, args.profile) == ("http://gateway:8000", "gemma-3-270m", "quick")
    assert args.replica == ["http://a:8000,kv-events=tcp://a:5557", "http://b:8000,name=b"]
    assert args.scenarios == ["cancel_storm", "tenant_burst"] and str(args.gates) == "gates.toml"
    assert args.require == ["prefix_isolation"] and args.allow_partial
    assert args.scenarios_dir == ROOT / "scenarios"
    assert env == {"KVGATE_TENANTS": TENANTS, "KVGATE_ADMIN_KEY": ADMIN_KEY}
    for secret in ("sk-acme-secret", "a:b", ADMIN_KEY):
        assert not any(secret in arg for arg in argv)
        assert secret not in result["stdout"]


def test_without_a_target_the_policies_run_as_a_matrix_with_their_globs_expanded(tmp_path: Path) -> None:
    for name in ("configs/a.toml", "configs/b.toml", "configs/baselines/none.toml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    inputs = {"policies": "configs/*.toml", "baseline-policies": "configs/baselines/*.toml", "out": "runs/ci"}
    result = _run_step("gate", inputs, tmp_path, exit_code=1)
    assert result["returncode"] == 1
    assert result["outputs"] == {"out": "runs/ci", "exit-code": "1", "verdict": "fail"}
    args = accepts(result["call"]["argv"])
    assert args is not None and args.command == "matrix"
    assert [str(p) for p in args.configs] == ["configs/a.toml", "configs/b.toml"]
    assert [str(p) for p in args.baseline] == ["configs/baselines/none.toml"]
    assert (args.profile, str(args.out)) == ("ci", "runs/ci")
    assert result["call"]["env"] == {}, "an input not given is no variable at all, not an empty setting"


def test_a_stored_baseline_is_passed_as_against(tmp_path: Path) -> None:
    result = _run_step("gate", {"target": "http://t:8000", "against": "baselines/main"}, tmp_path, exit_code=2)
    assert result["returncode"] == 2 and result["outputs"]["verdict"] == "error"
    argv = result["call"]["argv"]
    assert argv[argv.index("--against") + 1] == "baselines/main"
    assert accepts(argv) is not None


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({}, "give a target URL, or policies"),
        ({"model": "m", "policies": "c.toml"}, "give target too"),
        ({"target": "http://t", "baseline-policies": "b.toml"}, "leave target empty"),
        ({"target": "http://t", "policies": "a.toml b.toml"}, "at most one config"),
    ],
)
def test_inputs_that_do_not_fit_together_fail_before_kvgate_starts(
    inputs: dict[str, str], message: str, tmp_path: Path
) -> None:
    result = _run_step("gate", inputs, tmp_path)
    assert result["returncode"] == 2 and result["call"] is None
    assert "::error title=kvgate::" in result["stdout"] and message in result["stdout"]


def test_each_key_is_masked_before_the_gate_runs(tmp_path: Path) -> None:
    context = {"steps.install.outputs.kvgate": str(Path(sys.executable).parent / "kvgate")}
    step = next(s for s in STEPS if s.get("name") == "Mask the keys")
    assert STEPS.index(step) < STEPS.index(_step("gate"))
    env = {"PATH": os.environ["PATH"], **_step_env(step, {"tenants": TENANTS, "admin-key": ADMIN_KEY}, context)}
    done = subprocess.run(["bash", "-c", step["run"]], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"::add-mask::{k}" for k in (ADMIN_KEY, "sk-acme-secret", "a:b")]


# -- where the action is used -----------------------------------------------------------------


def _uses_of_the_action(document: dict[str, Any], is_action: Any) -> list[dict[str, Any]]:
    return [
        step for job in document["jobs"].values() for step in job.get("steps", []) if is_action(step.get("uses", ""))
    ]


def _check_with(step: dict[str, Any]) -> None:
    given = step.get("with", {})
    assert set(given) <= set(ACTION["inputs"]), set(given) - set(ACTION["inputs"])
    for name, spec in ACTION["inputs"].items():
        assert not spec.get("required") or name in given, name
    for name in ("tenants", "admin-key"):
        if name in given:  # a key written into a workflow is a key published
            assert re.fullmatch(r"\$\{\{\s*secrets\.\w+\s*\}\}", given[name]), given[name]


def test_the_projects_own_gate_job_runs_the_action() -> None:
    workflow = yaml.safe_load((ROOT / ".github/workflows/kvgate.yml").read_text())
    steps = _uses_of_the_action(workflow, lambda uses: uses == "./")
    assert len(steps) == 1
    _check_with(steps[0])
    assert steps[0] in workflow["jobs"]["gate"]["steps"]


def _yaml_blocks(markdown: str) -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", markdown, flags=re.DOTALL)


def test_the_example_in_docs_ci_is_a_workflow_that_uses_the_action_in_about_fifteen_lines() -> None:
    blocks = _yaml_blocks((ROOT / "docs/ci.md").read_text())
    example = yaml.safe_load(blocks[0])
    assert len(blocks[0].strip().splitlines()) <= 20
    assert {"on", "jobs"} <= set(example) or {True, "jobs"} <= set(example)  # YAML 1.1 reads `on` as True
    steps = _uses_of_the_action(example, lambda uses: re.fullmatch(r"[\w-]+/kvgate@[\w.-]+", uses))
    assert len(steps) == 1
    _check_with(steps[0])
    assert "target" in steps[0]["with"] and "tenants" in steps[0]["with"]


def test_every_workflow_in_docs_ci_uses_only_declared_inputs() -> None:
    for block in _yaml_blocks((ROOT / "docs/ci.md").read_text()):
        document = yaml.safe_load(block)
        if isinstance(document, dict) and "jobs" in document:
            for step in _uses_of_the_action(document, lambda uses: "kvgate@" in uses or uses == "./"):
                _check_with(step)


def test_the_gate_step_log_line_is_the_command_it_runs(tmp_path: Path) -> None:
    """The script echoes what it runs: that line, split as a shell would, is the argv kvgate got."""
    result = _run_step("gate", {"target": "http://t:8000", "scenarios": "short_qa"}, tmp_path)
    line = next(x for x in result["stdout"].splitlines() if x.startswith("kvgate "))
    assert shlex.split(line)[1:] == result["call"]["argv"]
