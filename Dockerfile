# kvgate as a container image: the `kvgate` command, its scenarios and policy configs, run
# records written to the volume mounted at /runs. docs/deploy.md has the build command, what was
# verified and how the image runs in Kubernetes (deploy/).
#
#   docker build -t kvgate:dev .       (or podman build; --build-arg PYTHON_IMAGE=... another base)
#   docker run --rm -v "$PWD/runs:/runs" kvgate:dev run --target http://host:8000 --profile quick
#
# The working directory /opt/kvgate looks like a checkout: `configs/` and `scenarios/` are there,
# and `runs/` (kvgate's default for run records) points at /runs.

ARG PYTHON_IMAGE=python:3.12-slim-bookworm

# Build stage: kvgate and its dependencies into a virtual environment, copied whole below
# (no compiler or pip cache in the final image).
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY record record
COPY reference_engine reference_engine
COPY harness harness
COPY gates gates
COPY reports reports
RUN python -m venv /opt/venv && /opt/venv/bin/pip install /src

FROM ${PYTHON_IMAGE}
ARG VERSION=dev
ARG REVISION=""
ARG SOURCE=""
LABEL org.opencontainers.image.title="kvgate" \
      org.opencontainers.image.description="Chaos/load testing and CI gates for the KV cache of LLM inference servers" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}"

# A numeric non-root user, so that Kubernetes' runAsNonRoot can check it; /runs is its own.
RUN useradd --system --uid 10001 --user-group --home-dir /home/kvgate --create-home kvgate \
    && mkdir /runs && chown kvgate:kvgate /runs
COPY --from=build /opt/venv /opt/venv
COPY configs /opt/kvgate/configs
COPY scenarios /opt/kvgate/scenarios
COPY pd_scenarios /opt/kvgate/pd_scenarios
RUN ln -s /runs /opt/kvgate/runs

ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /opt/kvgate
USER 10001:10001
VOLUME ["/runs"]
# locust's web UI and its master's port, for the locust master of deploy/locust.
EXPOSE 8089 5557
ENTRYPOINT ["kvgate"]
CMD ["--help"]
