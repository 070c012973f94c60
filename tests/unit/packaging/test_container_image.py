"""The Dockerfile, read as text: what an image build here cannot show (no base image can be
pulled on these machines, docs/deploy.md). The base is a build argument, every package the
project installs is copied in, nothing copied is left out of the build context by .dockerignore,
the image runs as a numeric non-root user with `kvgate` as its entrypoint, and it carries the
OCI version and source labels.
"""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
# Instructions, with continuation lines joined and comments dropped.
INSTRUCTIONS = [
    line.strip()
    for line in re.sub(r"\\\n\s*", " ", DOCKERFILE).splitlines()
    if line.strip() and not line.lstrip().startswith("#")
]


def _all(keyword: str) -> list[str]:
    return [line.split(None, 1)[1] for line in INSTRUCTIONS if line.split(None, 1)[0] == keyword]


def _ignored(path: str) -> bool:
    patterns = [
        line.strip().rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    return any(fnmatch.fnmatch(path, p) or path.startswith(p + "/") for p in patterns)


def test_the_base_image_is_a_build_argument_of_every_stage() -> None:
    assert INSTRUCTIONS[0].startswith("ARG PYTHON_IMAGE=python:") and "slim" in INSTRUCTIONS[0]
    for stage in _all("FROM"):
        assert stage.split()[0] == "${PYTHON_IMAGE}"


def test_every_package_and_file_the_install_needs_is_copied_and_in_the_build_context() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = {p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]}
    copied = {source for line in _all("COPY") if "--from" not in line for source in line.split()[:-1]}
    assert packages | {"pyproject.toml", "README.md", "scenarios", "configs"} <= copied
    for source in copied:
        assert (ROOT / source).exists(), source
        assert not _ignored(source), f"{source} is copied but .dockerignore leaves it out"
    assert _ignored(".venv") and _ignored("runs"), "the build context stays small"


def test_it_runs_kvgate_as_a_numeric_non_root_user_with_records_on_a_volume() -> None:
    (user,) = _all("USER")
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "Kubernetes' runAsNonRoot can only check a numeric user"
    assert json.loads(_all("ENTRYPOINT")[-1]) == ["kvgate"]
    assert json.loads(_all("VOLUME")[-1]) == ["/runs"]
    assert "ln -s /runs /opt/kvgate/runs" in DOCKERFILE and _all("WORKDIR")[-1] == "/opt/kvgate"


def test_it_carries_the_oci_version_and_source_labels() -> None:
    labels = " ".join(_all("LABEL"))
    for key, arg in (("version", "VERSION"), ("source", "SOURCE"), ("revision", "REVISION")):
        assert f'org.opencontainers.image.{key}="${{{arg}}}"' in labels
        assert any(line.startswith(f"{arg}") for line in _all("ARG"))
