# syntax=docker/dockerfile:1
# Placer: a Kubernetes scheduler run as a Kopf operator.
#   docker build -t placer:0.1.0 .        (or: make image)
# The chart runs it as `placer run --metrics-port 8080`, as user 65532 with a read-only root
# filesystem and a writable /tmp.

# ---- build: a wheel of placer, and a venv with the pinned runtime dependencies -------------
FROM python:3.11.14-slim-bookworm AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src

# Dependencies first, so that source changes reuse this layer. requirements.lock pins every
# package `pip install .` pulls; --no-deps + `pip check` fails the build if one is missing.
COPY requirements.lock ./
RUN python -m venv /opt/placer \
    && /opt/placer/bin/pip install --no-deps --require-virtualenv -r requirements.lock

COPY pyproject.toml README.md ./
COPY operator/ ./operator/
RUN /opt/placer/bin/pip wheel --no-deps --wheel-dir /wheels . \
    && /opt/placer/bin/pip install --no-deps --require-virtualenv /wheels/placer-*.whl \
    && /opt/placer/bin/python -m compileall -q /opt/placer/lib \
    && /opt/placer/bin/pip check \
    && /opt/placer/bin/placer --help > /dev/null

# ---- runtime ------------------------------------------------------------------------------
FROM python:3.11.14-slim-bookworm

LABEL org.opencontainers.image.title="placer" \
      org.opencontainers.image.description="A Kubernetes scheduler with hot-reloaded profiles, run as a Kopf operator" \
      org.opencontainers.image.licenses="Apache-2.0"

# A fixed non-root user (65532, as distroless "nonroot"), matching the chart's runAsUser.
RUN groupadd --system --gid 65532 placer \
    && useradd --system --uid 65532 --gid 65532 --no-create-home \
       --home-dir /nonexistent --shell /usr/sbin/nologin placer

COPY --from=build /opt/placer /opt/placer

ENV PATH=/opt/placer/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp

USER 65532:65532
WORKDIR /tmp
EXPOSE 8080

ENTRYPOINT ["placer"]
CMD ["run"]
