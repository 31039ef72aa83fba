# rebalancer: a slim, non-root image whose entrypoint is the `rebalancer` command.
# Build: docker build -t rebalancer:0.1.0 .
# Two stages: the wheel is built in "builder"; the final image gets only the virtualenv.

ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY rebalancer ./rebalancer
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip wheel --no-deps --wheel-dir /wheels . \
    && /opt/venv/bin/pip install /wheels/rebalancer-*.whl \
    && /opt/venv/bin/python -m compileall -q /opt/venv/lib

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="rebalancer" \
      org.opencontainers.image.description="Kubernetes descheduler for topology spread" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
RUN groupadd --gid 65532 rebalancer \
    && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin rebalancer
COPY --from=builder /opt/venv /opt/venv
USER 65532:65532
ENTRYPOINT ["rebalancer"]
CMD ["--help"]
