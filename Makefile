# One entry point for contributors and CI. `make test` installs what it needs (tests/ci/bootstrap.sh)
# and runs every tier; CI (.ci/run) calls exactly that.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
ROOT := $(abspath .)
VENV := $(ROOT)/.venv
BUILD := $(ROOT)/.build
COLLECTION_BUILD := $(BUILD)/ansible_collections/hpc/slurm_k8s
export PATH := $(VENV)/bin:$(PATH)
export ANSIBLE_COLLECTIONS_PATH := $(ROOT)/.cache/collections
export ANSIBLE_COLLECTIONS_SCAN_SYS_PATH := false
export PYTHONDONTWRITEBYTECODE := 1
PYTEST := python -m pytest -p no:cacheprovider

.PHONY: test deps sanity units lint static integration harness clean

## test: every tier, in order of speed (T0 static, T1 unit, T2 real Slurm, T3 Docker harness)
test: deps sanity units lint static integration harness
	@echo "make test: all tiers passed"

## deps: Debian packages, the venv and the collections we depend on (idempotent)
deps:
	bash tests/ci/bootstrap.sh

## sanity: ansible-test sanity on a copy laid out as ansible_collections/hpc/slurm_k8s
sanity:
	rm -rf $(COLLECTION_BUILD) && mkdir -p $(COLLECTION_BUILD)
	git ls-files -z --cached --others --exclude-standard | rsync -a --from0 --files-from=- ./ $(COLLECTION_BUILD)/
	# ansible-test lists a collection's files with git: give the copy its own repository.
	cd $(COLLECTION_BUILD) && git init -q && git add -A
	cd $(COLLECTION_BUILD) && ansible-test sanity --venv --python 3.11 --color no

## units: T1, module cases in YAML and pure helpers
units:
	PYTHONPATH=$(ROOT)/.cache/collections $(PYTEST) tests/unit -q

## lint: ansible-lint (production profile) and the changelog fragments
lint:
	ansible-lint --offline --profile production
	antsibull-changelog lint

## static: T0 rendered manifests (schemas for Kubernetes 1.29+, checkov, security baseline, restart
## semantics, invalid input) and the Molecule scenarios' syntax; no cluster needed
# Molecule 26 looks in extensions/molecule/ inside a collection: point it at molecule/ instead.
static: export MOLECULE_GLOB := molecule/*/molecule.yml
static:
	molecule list
	molecule syntax --all
	$(PYTEST) tests/static -q

## integration: T2, the modules through ansible against real Slurm 22.05 daemons on this host
integration:
	$(PYTEST) tests/integration -q

## harness: T3, the Docker harness and the cluster it runs from our rendered manifests
harness:
	tests/images/start-docker.sh
	$(PYTEST) tests/harness -q

clean:
	rm -rf $(BUILD) tests/output
