# Utilisation what-if (docs/whatif.md): gpuops.k8s.gpu_whatif on the Alibaba 2023 GPU trace, read in place
# (WHATIF_TRACE, default $GPUOPS_TRACE_DIR or shared/data/alibaba-gpu-2023/csv above the checkout).
#   make whatif         the FGD paper's experiment set (6 policies x 17 workloads x WHATIF_SEEDS seeds) and the
#                       seed's claims (sharing modes, cluster sizes), with a progress bar; reports in WHATIF_OUT
#                       (paper/whatif.md, claims/whatif.md). With WHATIF_EXPECTED=<the artefact's
#                       experiments/analysis/expected_results> the paper report shows our difference to its curves.
#   make bench-whatif   seconds per experiment (8,152 pods + inflation on 6,212 GPUs) per policy and sharing mode
#   make bench-whatif-replanned  departures: exclusive / fractional / static mig / static planned / replanned, GPU-hours
#                       held, served, never placed, pending, reconfigurations (3 workloads x WHATIF_SEEDS seeds), its
#                       target met or not; report in WHATIF_OUT/replanned, the SVGs also in docs/img
#   make bench-capacity  GPUs needed per strategy to serve 99 % (capacity_search, 3 loaded workloads x WHATIF_SEEDS
#                       seeds), USD/h, utilisation, paired differences with 95 % CIs, the seed's claims re-measured
# Not part of `make test` (minutes of CPU); tests/e2e/test_whatif_scheduler.py runs in `make e2e`.
.PHONY: whatif whatif-paper whatif-claims bench-whatif bench-whatif-replanned bench-capacity

WHATIF_OUT ?= $(TOP)/.build/whatif
WHATIF_SEEDS ?= 10
WHATIF_TRACE ?=
WHATIF_EXPECTED ?=
WHATIF_ARGS = --out $(WHATIF_OUT) --seeds $(WHATIF_SEEDS) $(if $(WHATIF_TRACE),--trace $(WHATIF_TRACE))

whatif: whatif-paper whatif-claims

whatif-paper: venv
	python benchmarks/whatif_sweep.py paper $(WHATIF_ARGS) $(if $(WHATIF_EXPECTED),--expected $(WHATIF_EXPECTED))

whatif-claims: venv
	python benchmarks/whatif_sweep.py claims $(WHATIF_ARGS)

bench-whatif: venv
	python benchmarks/whatif_bench.py $(if $(WHATIF_TRACE),--trace $(WHATIF_TRACE))

bench-whatif-replanned: venv
	python benchmarks/whatif_replanned.py --seeds $(WHATIF_SEEDS) --out $(WHATIF_OUT)/replanned --img docs/img \
	  $(if $(WHATIF_TRACE),--trace $(WHATIF_TRACE))

# GPUs needed per strategy at a service target (capacity_search) on loaded workloads, and the seed's claims
# (docs/whatif.md "How many GPUs does each strategy need?"; dra-first-fit and dra-steered add about 2 x 130 s of CPU for 10 seeds); an estimated 15-20 min of CPU (43-47 s per strategy
# and 10 seeds measured for exclusive and fractional); not yet run whole on an idle machine.
bench-capacity: venv
	python benchmarks/whatif_capacity.py --seeds $(WHATIF_SEEDS) --out $(WHATIF_OUT)/capacity --img docs/img \
	  $(if $(WHATIF_TRACE),--trace $(WHATIF_TRACE))
