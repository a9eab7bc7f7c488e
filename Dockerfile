# syntax=docker/dockerfile:1
# Both processes of weir, one target each:
#
#   docker build --target weir           -t weir .
#   docker build --target weir-pyruntime -t weir-pyruntime .
#
# Base images are build arguments, so a mirror or a locally bootstrapped image can
# stand in for each. The builder is the Rust image with the runtime image's Python
# copied in: weir-pyruntime embeds exactly the interpreter it will run with.
# Dependencies are cooked by cargo-chef in a layer of their own, rebuilt only when a
# manifest or Cargo.lock changes. The embedded models are fetched at build time by
# scripts/fetch-models (pinned, hash-checked wheels) into the weir image, and
# Flowise's UI by scripts/fetch-ui (pinned, hash-checked npm tarballs).

ARG RUST_IMAGE=docker.io/library/rust:1.95-slim-bookworm
ARG PYTHON_IMAGE=docker.io/library/python:3.11-slim-bookworm
ARG DEBIAN_IMAGE=docker.io/library/debian:bookworm-slim
ARG CARGO_CHEF_VERSION=0.1.71

FROM ${PYTHON_IMAGE} AS python

FROM ${RUST_IMAGE} AS chef
ARG CARGO_CHEF_VERSION
COPY --from=python /usr/local /usr/local
ENV PYO3_PYTHON=/usr/local/bin/python3.11 \
    LD_LIBRARY_PATH=/usr/local/lib \
    CARGO_TERM_COLOR=never
RUN cargo install --locked cargo-chef --version "${CARGO_CHEF_VERSION}"
WORKDIR /src

FROM chef AS planner
COPY . .
RUN cargo chef prepare --recipe-path recipe.json

FROM chef AS build
COPY --from=planner /src/recipe.json recipe.json
RUN cargo chef cook --release --recipe-path recipe.json
COPY . .
RUN cargo build --release --locked --bin weir --bin weir-pyruntime

FROM python AS models
WORKDIR /src
COPY scripts/fetch-models scripts/fetch-models
RUN WEIR_MODELS_DIR=/models ./scripts/fetch-models

FROM ${DEBIAN_IMAGE} AS ui
# npm packs the two pinned tarballs; nothing of Node.js stays in the weir image.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates nodejs npm \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY scripts/fetch-ui scripts/fetch-ui
RUN WEIR_UI_DIR=/ui ./scripts/fetch-ui

# ---------------------------------------------------------------- the API server
FROM ${DEBIAN_IMAGE} AS weir
# tini reaps zombies as PID 1; curl is the health check's client.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends tini ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --home-dir /var/lib/weir --create-home weir
COPY --from=build /src/target/release/weir /usr/local/bin/weir
COPY --from=models /models /opt/weir/models
COPY --from=ui /ui /opt/weir/ui
ENV WEIR_DATA_DIR=/var/lib/weir \
    WEIR_MODELS_DIR=/opt/weir/models \
    WEIR_UI_DIR=/opt/weir/ui \
    HOST=0.0.0.0 \
    PORT=3000
USER 10001:10001
WORKDIR /var/lib/weir
VOLUME ["/var/lib/weir"]
EXPOSE 3000
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["curl", "-fsS", "-o", "/dev/null", "http://127.0.0.1:3000/api/v1/ping"]
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/weir"]
CMD ["serve"]

# ---------------------------------------------------------------- the Python tool runtime
FROM python AS weir-pyruntime
ARG UV_VERSION=0.13.8
# passt (pasta) and nftables: the public network mode; tini as PID 1; Node.js and
# npm (npx): stdio MCP servers, run in the sandbox (docs/python-runtime.md).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends tini passt nftables nodejs npm \
    && rm -rf /var/lib/apt/lists/* \
    && pip install --no-cache-dir "uv==${UV_VERSION}"
COPY --from=build /src/target/release/weir-pyruntime /usr/local/bin/weir-pyruntime
ENV PY_TOOL_HOST=0.0.0.0 \
    PY_TOOL_PORT=8000 \
    PY_TOOL_VENVS=/var/lib/weir-pyruntime/venvs \
    PY_TOOL_ARTIFACTS=/var/lib/weir-pyruntime/artifacts \
    PY_TOOL_UV=/usr/local/bin/uv
# Root of the container's own user namespace: every isolation layer needs it (see
# docs/deployment.md "The images"); run the container with a user namespace (Podman rootless,
# Docker userns-remap, Kubernetes hostUsers: false) so that it is no one on the host.
# hadolint ignore=DL3002
USER root
WORKDIR /var/lib/weir-pyruntime
VOLUME ["/var/lib/weir-pyruntime"]
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python3", "-c", "import urllib.request as u; u.urlopen('http://127.0.0.1:8000/tools/health', timeout=2)"]
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/weir-pyruntime"]
