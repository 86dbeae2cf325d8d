# Kubernetes GPU stack roles (device_plugin, dcgm_exporter, gpu_tenancy, gpu_autoscaling):
#   make stack-validate   render every role (tests/stack/scenarios) and validate each manifest offline
#                         against the Kubernetes OpenAPI schema (strict) of the supported versions
#   make stack-bench      apply / re-apply times of the whole stack on a 100-node kwok cluster
.PHONY: stack-validate stack-bench

TEST_TARGETS += stack-validate

stack-validate: venv collections
	python -m pytest -q -p no:cacheprovider tests/stack

stack-bench: venv collections
	python benchmarks/stack_apply.py
