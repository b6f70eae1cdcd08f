# netsched developer entry points. `make demo` runs the main job, `make test` the
# whole suite; both install what they need (a venv in .venv, control-plane binaries
# built from Go modules into ~/.cache/netsched).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
LANES  := test-lint test-unit test-integration test-faults test-e2e test-compat  # in the order `make test` runs them
# The suite runs on hack/controlplane's default Kubernetes (1.37); test-compat runs the tests marked
# `compat` (pyproject.toml: the chart's e2e install and the integration files that touch version-specific
# APIs) again on the older minor. Each minor's binaries are built once and cached side by side.
KUBERNETES_COMPAT := 1.34

.PHONY: install wheel controlplane prometheus node-packages image image-train demo test $(LANES) unit integration faults e2e compat lint clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

install: $(VENV)/.installed

# The netsched wheel (the CLI and the kubectl plugin) in dist/, for `pip install dist/netsched-*.whl`
# anywhere (netsched is not on PyPI; docs/kubectl-plugin.md). tests/integration/test_wheel_install.py does this.
wheel: install
	$(BIN)/pip wheel --quiet --no-deps --wheel-dir dist .
	@ls dist/netsched-*.whl

controlplane:
	@bash hack/controlplane/build.sh >/dev/null

# The image build (buildah, mmdebstrap) and the dev-cluster's real node (containerd, runc, CNI).
NODE_PACKAGES := buildah mmdebstrap runc containerd umoci containernetworking-plugins iptables conntrack
node-packages:
	@dpkg -s $(NODE_PACKAGES) >/dev/null 2>&1 || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(NODE_PACKAGES) >/dev/null; }

# The telemetry tests scrape the agents with a real Prometheus (Debian's package).
prometheus:
	@command -v prometheus >/dev/null || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }

# The serving image netsched:<version> (and netsched:<version>-train), built with buildah from a
# base image it makes itself where no registry serves python:3.11-slim (hack/image/build.sh; root).
image: node-packages
	@bash hack/image/build.sh

image-train:
	@bash hack/image/build.sh --train

demo: install controlplane
	$(BIN)/netsched demo

# The suite in lanes; each runs alone (`make test-unit`, ...) and `make test` runs them all, in this
# order, so a lint or unit failure is seen before the clusters start. pytest prints each lane's 25
# slowest tests (pyproject.toml).
test-lint: install
	$(BIN)/ruff check netsched tests bench hack
	$(BIN)/lint-imports
	$(BIN)/mypy

# No processes or clusters: the unit tests run on two workers.
test-unit: install
	$(BIN)/pytest -n 2 tests/unit

# Two workers, each test file whole on one of them: a worker starts its own session dev-cluster, and a
# file's module-scoped clusters and fixtures stay with it. Most of a cluster test's time is waiting on
# the cluster, so two files at once take about half the time even on a loaded machine.
PARALLEL_FILES := -n 2 --dist loadfile

test-integration: install controlplane prometheus
	$(BIN)/pytest $(PARALLEL_FILES) tests/integration

test-faults: install controlplane
	$(BIN)/pytest $(PARALLEL_FILES) tests/faults

# The install path end to end (root): image, real node, helm install, GPUJobs, uninstall.
test-e2e: install controlplane node-packages
	@bash hack/controlplane/build.sh --node >/dev/null
	$(BIN)/pytest tests/e2e -s

# The compatibility lane, last: the same dev-cluster on the older minor (NETSCHED_KUBERNETES), its
# integration files two at a time, then the chart's e2e install (root). On a cold machine the first run
# builds that minor's control plane and kubelet too.
test-compat: install prometheus node-packages
	@NETSCHED_KUBERNETES=$(KUBERNETES_COMPAT) bash hack/controlplane/build.sh --node >/dev/null
	NETSCHED_KUBERNETES=$(KUBERNETES_COMPAT) $(BIN)/pytest $(PARALLEL_FILES) -m compat tests/integration
	NETSCHED_KUBERNETES=$(KUBERNETES_COMPAT) $(BIN)/pytest -m compat tests/e2e -s

# pytest exits 5 when it collects no tests; make treats that as the failure it is. Each lane's time
# is printed as it ends.
test:
	@for lane in $(LANES); do started=$$(date +%s); $(MAKE) --no-print-directory $$lane || exit $$?; \
		echo "[make test] $$lane: $$(( $$(date +%s) - started )) s"; done

# the lanes' former names
lint: test-lint
unit: test-unit
integration: test-integration
faults: test-faults
e2e: test-e2e
compat: test-compat

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
