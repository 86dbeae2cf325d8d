# Molecule scenarios of the host roles (molecule/<role>/), in Debian 12 containers under podman.
# `make molecule` installs podman/runc/debootstrap when missing, builds the base image once
# (hack/molecule-setup.sh) and runs each scenario (converge, idempotence, verify), timing each;
# MOLECULE_JOBS at a time (default 2; the longest, mig, first).
MOLECULE_SCENARIOS ?= mig nvidia_driver container_toolkit
TEST_TARGETS += molecule
# `make test` installs missing tools (as root) and builds a missing base image while the stages before molecule run
# (log .cache/molecule-setup.log)
TEST_BACKGROUND += echo "=== background: hack/molecule-setup.sh --prefetch (log .cache/molecule-setup.log)"; \
  (CONTAINERS_CONF=$(TOP)/molecule/containers.conf nice -n 10 hack/molecule-setup.sh --prefetch \
   > .cache/molecule-setup.log 2>&1 &);

.PHONY: molecule molecule-setup

molecule-setup:
	@CONTAINERS_CONF=$(TOP)/molecule/containers.conf hack/molecule-setup.sh

molecule: venv collections molecule-setup
	@CONTAINERS_CONF=$(TOP)/molecule/containers.conf XDG_CACHE_HOME=$(TOP)/.cache \
	  MOLECULE_GLOB='molecule/*/molecule.yml' hack/molecule-run.sh $(MOLECULE_SCENARIOS)
