# MIG planner: benchmark of layout transitions (gpuops.k8s plan vs mig-parted's flush-and-recreate).
.PHONY: bench

bench: venv
	python benchmarks/mig_transitions.py
