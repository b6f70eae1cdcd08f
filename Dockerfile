# One image for every netsched component; the subcommand picks it:
#   netsched operator | extender | agent ...   (the Helm chart passes each one's flags)
# Build: docker build -t netsched:0.1.0 .          (without Docker: hack/image/build.sh, `make image`)
# The serving image (the last stage, the default) has no training dependencies; the chart's
# retrain CronJob runs the -train image: docker build --target train -t netsched:0.1.0-train .
# Dependencies come pinned from requirements.lock (+ requirements-train.lock); netsched itself is
# installed without resolving any.

FROM python:3.11-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN python -m venv /opt/netsched
COPY requirements.lock /tmp/requirements.lock
RUN /opt/netsched/bin/pip install -r /tmp/requirements.lock
COPY pyproject.toml README.md /src/
COPY netsched /src/netsched
RUN /opt/netsched/bin/pip install --no-deps /src

# What serving never loads, removed from a copy of the venv: kubernetes' asyncio client (netsched
# and kopf use neither it nor each other's), the test suites of pandas and numpy, numpy's build
# tools, ONNX Runtime's offline tools and its C API library (the Python module links the runtime
# in, not against it), pip itself (the image is read-only at run time), and the debug sections
# some extension modules keep (uvloop's alone: 11 MB). Only modules auditwheel left alone:
# stripping a library it patched (RPATH set, or in a .libs folder) breaks its ELF layout.
FROM build AS serving-venv
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends binutils >/dev/null
RUN cd /opt/netsched/lib/python3.11/site-packages \
 && rm -rf kubernetes/aio pandas/tests numpy/*/tests numpy/tests numpy/distutils numpy/f2py \
      onnxruntime/transformers onnxruntime/quantization onnxruntime/tools onnxruntime/capi/libonnxruntime.so* \
      pip pip-* setuptools setuptools-* pkg_resources _distutils_hack distutils-precedence.pth \
 && rm -f /opt/netsched/bin/pip /opt/netsched/bin/pip3* /opt/netsched/bin/f2py /opt/netsched/bin/numpy-config \
 && for so in $(find . -name '*.cpython-311-*.so' -type f); do \
      readelf -d "$so" | grep -q -E 'RPATH|RUNPATH' || strip --strip-debug "$so"; done

FROM build AS train-venv
COPY requirements-train.lock /tmp/requirements-train.lock
RUN /opt/netsched/bin/pip install -r /tmp/requirements-train.lock -c /tmp/requirements.lock

FROM python:3.11-slim AS runtime
# A named non-root user: kopf and getpass look the uid up. Numeric USER lets the kubelet check runAsNonRoot.
RUN groupadd --gid 65532 netsched \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin netsched
ENV PATH=/opt/netsched/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
ENTRYPOINT ["netsched"]
CMD ["--help"]

# `netsched retrain` (and train, evaluate without plots): the serving image plus scikit-learn and skl2onnx.
FROM runtime AS train
COPY --from=train-venv /opt/netsched /opt/netsched
COPY models /opt/netsched/models
USER 65532:65532

# The serving image: extender, operator, agent, packer.
FROM runtime AS serving
COPY --from=serving-venv /opt/netsched /opt/netsched
# The default completion-time model (models/README.md); the chart's extender.model.source=image uses it.
COPY models /opt/netsched/models
USER 65532:65532
