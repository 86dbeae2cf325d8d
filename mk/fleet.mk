# Fleet operations (docs/fleet-operations.md): the AWX execution environment.
#   make ee-check     ansible-builder create (offline) on execution-environment/, checked by tests/ee
#   make ee-context   the build context in .build/ee (then: podman build -f .build/ee/Containerfile .build/ee)
#   make bench-fleet  200 simulated 8-GPU hosts: gpu_info + mig_partition (check mode) vs ping + command
#                     (benchmarks/fleet_overhead.py; BENCH_FLEET_ARGS="--hosts 50 --runs 1" for a short run)
.PHONY: ee-check ee-context bench-fleet

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
