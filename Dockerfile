# rebalancer: a slim, non-root image whose entrypoint is the `rebalancer` command.
# Build (reproducible: the same commit gives the same image digest):
#   t="$(git log -1 --format=%ct)"; buildah bud --timestamp "$t" --build-arg SOURCE_DATE_EPOCH="$t" \
#     --build-arg REBALANCER_COMMIT="$(git rev-parse HEAD)" -t rebalancer:0.1.0 .
# or scripts/release.sh, which does that and writes the SBOM and checksums beside it.
# Two stages: "builder" installs the locked dependencies (hashes checked) and the wheel into a
# virtualenv without pip; the final image gets only that virtualenv over the pinned base.

ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm@sha256:86adf8dbadc3d6e82ee5dd2c74bec2e1c2467cdad47886280501df722372d2e1

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONHASHSEED=0
ARG REBALANCER_COMMIT=unknown
# The time stamped into the wheel's zip entries (1980-01-01, the earliest a zip holds, unless
# given): with it the wheel, and so the record pip keeps of its hash, is the same every build.
ARG SOURCE_DATE_EPOCH=315532800
WORKDIR /src
COPY requirements.lock requirements-build.lock pyproject.toml README.md ./
COPY rebalancer ./rebalancer
# The build backend and every runtime dependency come from the locks with their hashes; the
# virtualenv has no pip; bytecode is compiled once, keyed by source hash rather than mtime.
RUN python -m venv /opt/build \
    && /opt/build/bin/pip install --no-compile --require-hashes --no-deps -r requirements-build.lock \
    && printf '%s\n' "$REBALANCER_COMMIT" > rebalancer/BUILD_COMMIT \
    && /opt/build/bin/pip wheel --no-build-isolation --no-deps --wheel-dir /wheels . \
    && python -m venv --without-pip /opt/venv \
    && /opt/build/bin/pip --python /opt/venv/bin/python install --no-compile --require-hashes \
       --no-deps -r requirements.lock \
    && /opt/build/bin/pip --python /opt/venv/bin/python install --no-compile --no-deps \
       /wheels/rebalancer-*.whl \
    && /opt/venv/bin/python -m compileall -q --invalidation-mode unchecked-hash /opt/venv/lib

FROM ${PYTHON_IMAGE}
ARG REBALANCER_COMMIT=unknown
LABEL org.opencontainers.image.title="rebalancer" \
      org.opencontainers.image.description="Kubernetes descheduler for topology spread" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.revision="${REBALANCER_COMMIT}"
ENV PATH=/opt/venv/bin:$PATH \
    HOME=/nonexistent \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# The base's own pip, setuptools and wheel are not needed to run (a no-op on a base without them).
RUN rm -rf /usr/local/bin/pip* /usr/local/lib/python3*/site-packages/pip \
       /usr/local/lib/python3*/site-packages/pip-* /usr/local/lib/python3*/site-packages/setuptools* \
       /usr/local/lib/python3*/site-packages/wheel* /usr/local/lib/python3*/site-packages/_distutils_hack
COPY --from=builder /opt/venv /opt/venv
USER 65532:65532
ENTRYPOINT ["rebalancer"]
CMD ["--help"]
