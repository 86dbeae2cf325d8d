# Mutation testing of the decision code (docs/testing.md): cosmic-ray mutates each file of
# tests/mutation/targets.yml in a copy of the tree (.cache/mutate/tree) and runs only that file's unit tests per
# mutant; prints the survivors per file and the score killed / (total - equivalent) (tests/mutation/equivalent.yml).
#   make mutate                                      all files; resumes the sessions in .cache/mutate
#   make mutate MUTATE_FILES=plugins/module_utils/mig/plan.py
#   make mutate MUTATE_ARGS=--rerun-survivors        after new tests: only the previous survivors again
#   make mutate MUTATE_ARGS=--fresh                  start over (also automatic when a file changed)
# Not part of `make test`: about an hour on 2 cores (docs/testing.md has the figures).
.PHONY: mutate

MUTATE_FILES ?=
MUTATE_ARGS ?=

mutate: venv collections
	nice -n 10 python hack/mutate.py $(MUTATE_ARGS) $(MUTATE_FILES)
