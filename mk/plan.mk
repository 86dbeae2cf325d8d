# Fleet planner (docs/planning.md): gpuops.k8s.gpu_plan on generated fleets of 100, 1,000 and 10,000 GPUs.
#   make bench-replan  the closed loop's controller work (docs/closed-loop.md): one re-plan of a 1,000-GPU fleet with
#                      200 pending GPU pods, timed step by step; the target (under 10 s) printed as met or not met.
#   make bench-plan    time in-module, GPUs and cost vs the MILP optimum and the LP bound, vs one GPU per replica and
#                      static all-1g / all-balanced fleets, re-plan churn after a 10 % demand change; the issue's
#                      targets printed as met or not met. Not part of `make test` (minutes of CPU).
.PHONY: bench-plan bench-replan

BENCH_PLAN_ARGS ?=

bench-plan: venv
	python benchmarks/plan_bench.py $(BENCH_PLAN_ARGS)

BENCH_REPLAN_ARGS ?=

bench-replan: venv
	python benchmarks/replan_bench.py $(BENCH_REPLAN_ARGS)
