# One image for every netsched component; the subcommand picks it:
#   netsched operator | extender | agent ...   (the Helm chart passes each one's flags)
# Build: docker build -t netsched:0.1.0 .
# Dependencies come pinned from requirements.lock; netsched itself is installed without resolving any.

FROM python:3.11-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN python -m venv /opt/netsched
COPY requirements.lock /tmp/requirements.lock
RUN /opt/netsched/bin/pip install -r /tmp/requirements.lock
COPY pyproject.toml README.md /src/
COPY netsched /src/netsched
RUN /opt/netsched/bin/pip install --no-deps /src

FROM python:3.11-slim
# A named non-root user: kopf and getpass look the uid up. Numeric USER lets the kubelet check runAsNonRoot.
RUN groupadd --gid 65532 netsched \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin netsched
COPY --from=build /opt/netsched /opt/netsched
# The default completion-time model (models/README.md); the chart's extender.model.source=image uses it.
COPY models /opt/netsched/models
ENV PATH=/opt/netsched/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
USER 65532:65532
ENTRYPOINT ["netsched"]
CMD ["--help"]
