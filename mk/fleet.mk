# Fleet operations (docs/fleet-operations.md): the AWX execution environment.
#   make ee-check     ansible-builder create (offline) on execution-environment/, checked by tests/ee
#   make ee-context   the build context in .build/ee (then: podman build -f .build/ee/Containerfile .build/ee)
#   make bench-fleet  200 simulated 8-GPU hosts: gpu_info + mig_partition (check mode) vs ping + command
#                     (benchmarks/fleet_overhead.py; BENCH_FLEET_ARGS="--hosts 50 --runs 1" for a short run)
#   make chaos        50 simulated 8-GPU hosts, playbooks/gpu_nodes.yml (mig role) with seeded random NVML faults on
#                     5 % of mutating calls (the chaos mix: mostly transient, retried inside the run), re-run until
#                     converged; prints runs to converge, faults, retries, hosts failed, kept instances destroyed,
#                     processes lost (benchmarks/chaos_fleet.py; CHAOS_ARGS="--hosts 10 --gpus 2" for a short run,
#                     "--attempts 1" for no retry, "--mix unknown" for the old all-permanent faults). Not in make test.
.PHONY: ee-check ee-context bench-fleet chaos

TEST_TARGETS += ee-check

ee-check: venv
	python -m pytest -q -p no:cacheprovider tests/ee

ee-context: venv
	ansible-galaxy collection build . --output-path .build --force
	cp .build/gpuops-k8s-$$(python -c 'import yaml;print(yaml.safe_load(open("galaxy.yml"))["version"])').tar.gz execution-environment/gpuops-k8s.tar.gz
	ansible-builder create -f execution-environment/execution-environment.yml -c .build/ee --output-filename Containerfile
	rm -f execution-environment/gpuops-k8s.tar.gz

bench-fleet: venv collections
	python benchmarks/fleet_overhead.py $(BENCH_FLEET_ARGS)

chaos: venv collections
	python benchmarks/chaos_fleet.py --json .build/chaos.json $(CHAOS_ARGS)

# AWX jobs and event-driven remediation (docs/awx.md), on the local control plane like make e2e:
#   make awx-jobs   every job template of awx/job_templates.yml launched with ansible-runner as AWX does, in a
#                   fresh venv with only what execution-environment/ declares (cached by hash); job slicing
#   make eda        the rulebooks in ansible-rulebook: gpu_health_alerts.yml fed Alertmanager webhooks on a local
#                   port, gpu_replan.yml on GPU pods pending on the local control plane (its event source's watch);
#                   hack/eda-setup.sh installs a Java 17+ runtime when missing
.PHONY: awx-jobs eda
TEST_TARGETS += awx-jobs eda

awx-jobs: venv collections
	@if [ "$${GPUOPS_SKIP_E2E:-}" = 1 ]; then echo "awx-jobs: SKIPPED on request (GPUOPS_SKIP_E2E=1); nothing was tested"; exit 0; fi; \
	python -m pytest -q -p no:cacheprovider -s --durations=5 --basetemp=$(TOP)/.cache/pytest-awx-jobs tests/awx/test_awx_jobs.py

eda: venv collections
	@if [ "$${GPUOPS_SKIP_E2E:-}" = 1 ]; then echo "eda: SKIPPED on request (GPUOPS_SKIP_E2E=1); nothing was tested"; exit 0; fi; \
	hack/eda-setup.sh || exit 1; \
	python -m pytest -q -p no:cacheprovider -s --basetemp=$(TOP)/.cache/pytest-eda tests/awx/test_eda.py tests/awx/test_eda_replan.py
