# Local Kubernetes control plane (docs/local-cluster.md): etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kwok, built from Go modules by hack/k8s/build.sh into
# ~/.cache/gpuops/k8s/<version>/bin and started on 127.0.0.1.
#   make k8s-build      build what is missing (cold: about 6 min on an idle 2-core machine; then cached)
#   make cluster-up     start (or reuse) the cluster in .cache/cluster with the kwok GPU nodes of
#                       inventories/sim; the LAST line printed is `export KUBECONFIG=<path>`
#                       KUEUE=1: also build (hack/k8s/build.sh kueue, optional) and start the Kueue
#                       controller-manager with its CRDs and webhooks (docs/tenancy.md)
#                       METRICS=1: also build and start the GPU metric path (simulated DCGM exporter, kube-state-metrics,
#                       Prometheus, the custom-metrics stand-in; docs/autoscaling.md)
#   make cluster-down   stop what cluster-up started (by PID); logs stay in .cache/cluster/logs
#   make sim-lab        cluster-up, the simulated lab's hosts (playbooks/lab/sim_lab.yml), then
#                       playbooks/site.yml on inventories/sim/hosts.yml (docs/simulated-lab.md)
#   make e2e            the e2e tests (tests/e2e) on a real cluster, Kueue and the metric path included; fails if
#                       Go or the build is missing
# GPUOPS_SKIP_E2E=1 opts out of `make e2e` explicitly (for people without Go; CI never sets it).

.PHONY: k8s-build cluster-up cluster-down cluster-status sim-lab e2e

TEST_TARGETS += e2e
# make e2e needs every optional component too (Kueue, the metric path): none of their tests may skip
E2E_COMPONENTS := kueue prometheus kube-state-metrics metrics-standin
# the e2e tests that need them (Kueue; Prometheus, kube-state-metrics and the stand-in: the metric path and act 5 of the demo)
E2E_OPTIONAL_TESTS := tests/e2e/test_queueing_dra.py tests/e2e/test_autoscaling_metrics.py tests/e2e/test_demo.py tests/e2e/test_rightsize.py tests/e2e/test_usage_report.py tests/e2e/test_whatif_cluster.py
# the demo starts its own control plane (hack/demo.py): it runs beside the other optional tests, which mostly wait
# on controllers (Kueue, the HPA, Prometheus scrapes); its output is printed when both are done
E2E_BESIDE := tests/e2e/test_demo.py
E2E_BESIDE_LOG := $(TOP)/.cache/e2e-beside.log
CLUSTER_PY = $(VENV)/bin/python tests/e2e/lib/cluster.py

k8s-build:
	@hack/k8s/build.sh $(if $(filter 1,$(KUEUE)),kueue) $(if $(filter 1,$(METRICS)),prometheus kube-state-metrics metrics-standin)

cluster-up: venv k8s-build
	@KUEUE=$(KUEUE) METRICS=$(METRICS) $(CLUSTER_PY) up

cluster-down:
	@$(CLUSTER_PY) down

cluster-status:
	@$(CLUSTER_PY) status

sim-lab: venv collections k8s-build
	@eval "$$($(CLUSTER_PY) up | tail -n1)" && \
	ansible-playbook -i inventories/sim/hosts.yml playbooks/lab/sim_lab.yml && \
	ansible-playbook -i inventories/sim/hosts.yml playbooks/site.yml && \
	echo "simulated lab ready: export KUBECONFIG=$$KUBECONFIG"

e2e: venv collections
	@if [ "$${GPUOPS_SKIP_E2E:-}" = 1 ]; then \
	  echo "e2e: SKIPPED on request (GPUOPS_SKIP_E2E=1); nothing was tested"; exit 0; fi; \
	if ! command -v go >/dev/null; then \
	  echo "e2e: FAILED: Go is not installed; the local Kubernetes control plane is built from Go modules" \
	       "(install Go >= 1.26, or set GPUOPS_SKIP_E2E=1 to opt out)" >&2; exit 1; fi; \
	hack/k8s/build.sh || { echo "e2e: FAILED: hack/k8s/build.sh could not build the control plane" >&2; exit 1; }; \
	echo "e2e: the tests that need only the control plane"; \
	python -m pytest -q -p no:cacheprovider --durations=15 $(addprefix --ignore=,$(E2E_OPTIONAL_TESTS)) tests/e2e || exit 1; \
	hack/k8s/build.sh $(E2E_COMPONENTS) || { echo "e2e: FAILED: hack/k8s/build.sh could not build $(E2E_COMPONENTS)" >&2; exit 1; }; \
	echo "e2e: the tests that need $(E2E_COMPONENTS); $(E2E_BESIDE) beside them (own control plane; log $(E2E_BESIDE_LOG))"; \
	mkdir -p $(TOP)/.cache; GPUOPS_E2E_KUEUE=1 python -m pytest -q -p no:cacheprovider --durations=5 --basetemp=$(TOP)/.cache/e2e-beside-tmp \
	  $(E2E_BESIDE) > $(E2E_BESIDE_LOG) 2>&1 & beside=$$!; \
	GPUOPS_E2E_KUEUE=1 python -m pytest -q -p no:cacheprovider --durations=5 $(filter-out $(E2E_BESIDE),$(E2E_OPTIONAL_TESTS)); \
	rc=$$?; wait $$beside; brc=$$?; echo "=== e2e: $(E2E_BESIDE) (rc $$brc)"; cat $(E2E_BESIDE_LOG); \
	[ $$rc = 0 ] && [ $$brc = 0 ]
