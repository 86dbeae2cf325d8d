# gpuops.k8s — developer entry points. `make venv && make demo`, then `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

TOP := $(CURDIR)
VENV ?= $(TOP)/.venv
COLLECTIONS_ROOT := $(TOP)/.build/collections

# Keep ansible/molecule state inside the work tree (never $HOME) and find our collections first.
export PATH := $(VENV)/bin:$(PATH)
export ANSIBLE_HOME := $(TOP)/.cache/ansible
export ANSIBLE_REMOTE_TMP := $(TOP)/.cache/ansible/tmp
export ANSIBLE_LOCAL_TEMP := $(TOP)/.cache/ansible/tmp-local
export ANSIBLE_COLLECTIONS_PATH := $(COLLECTIONS_ROOT)
export ANSIBLE_NOCOWS := 1
export ANSIBLE_RETRY_FILES_ENABLED := 0
export PYTHONDONTWRITEBYTECODE := 1

# Test stages; mk/*.mk fragments append theirs (e2e, molecule, ...), and to TEST_BACKGROUND the shell commands
# (each ending in `;`) that `make test` starts in the background before the first stage.
TEST_TARGETS := lint units vermin integration sanity
TEST_BACKGROUND :=

-include mk/*.mk

.PHONY: help venv collections demo demo-mig demo-clean test lint typecheck units vermin integration sanity clean

help:
	@echo "make venv         create .venv (pinned toolchain) and install collections (no Galaxy)"
	@echo "make demo         the whole story on the simulated lab: fleet, plan, MIG, cluster, tenants, fault, what-if"
	@echo "make demo-mig     the MIG-only demo on the simulated hosts (no cluster)"
	@echo "make demo-clean   stop what a demo left running and remove its outputs (.cache/demo)"
	@echo "make test         everything CI runs: $(TEST_ORDER)"
	@echo "make clean        remove build outputs (.build, .cache/ansible)"

venv:
	@VENV=$(VENV) hack/venv.sh

collections:
	@hack/install-collections.sh $(COLLECTIONS_ROOT)

demo: venv collections
	@python hack/demo.py

demo-mig: venv collections
	ansible-playbook -i inventories/sim/hosts.yml playbooks/lab/demo_mig.yml

demo-clean:
	@python hack/demo.py --clean

# The stages that need the local cluster run last; the Go builds they need start in the background at once,
# at the lowest priority (nice 19) so that they take only the CPU the Python stages leave idle: first the
# control plane, then Kueue, Prometheus and the metrics stand-in. awx-jobs and eda need only the control
# plane, so they run first; `make e2e` runs its tests that need only the control plane while the optional
# components finish, then the rest. hack/k8s/build.sh stops waiting for the other build as soon as what it
# needs is there. Cached builds make all this a no-op (log: .cache/k8s-build.log).
CLUSTER_TARGETS := awx-jobs eda e2e
TEST_ORDER = $(filter-out $(CLUSTER_TARGETS),$(TEST_TARGETS)) $(filter $(TEST_TARGETS),$(CLUSTER_TARGETS))

test: venv collections
	@mkdir -p .cache; if command -v go >/dev/null && [ "$${GPUOPS_SKIP_E2E:-}" != 1 ]; then \
	  echo "=== background: hack/k8s/build.sh $(E2E_COMPONENTS) (log .cache/k8s-build.log)"; \
	  (GPUOPS_K8S_BUILD_JOBS=2 nice -n 19 hack/k8s/build.sh && \
	   GPUOPS_K8S_BUILD_JOBS=2 nice -n 19 hack/k8s/build.sh $(E2E_COMPONENTS)) > .cache/k8s-build.log 2>&1 & fi; \
	$(TEST_BACKGROUND) \
	set -e; for t in $(TEST_ORDER); do echo "=== make $$t"; $(MAKE) --no-print-directory $$t; done

lint: venv typecheck
	ansible-lint --offline

# Static types of the annotated module_utils packages (mypy.ini; docs/architecture.md "Types"). mypy imports them
# as the collection does, through the link .build/collections/ansible_collections/gpuops/k8s -> this checkout.
TYPED_PACKAGES := catalog common nvml sim report mig host health k8s metrics tenancy plan whatif
typecheck: venv
	@mkdir -p $(COLLECTIONS_ROOT)/ansible_collections/gpuops
	@[ -e $(COLLECTIONS_ROOT)/ansible_collections/gpuops/k8s ] || ln -sfn $(TOP) $(COLLECTIONS_ROOT)/ansible_collections/gpuops/k8s
	mypy $(foreach p,$(TYPED_PACKAGES),-p ansible_collections.gpuops.k8s.plugins.module_utils.$(p))

units: venv
	python -m pytest -q -rs -p no:cacheprovider tests/unit

# GPU-host code must stay Python 3.9 compatible (RHEL 9).
vermin: venv
	vermin -q --no-tips --violations -t=3.9- plugins/modules plugins/module_utils

integration: venv collections
	python -m pytest -q -p no:cacheprovider tests/integration

sanity: venv
	hack/sanity.sh

clean:
	rm -rf .build .cache/ansible
