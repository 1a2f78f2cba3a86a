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

LOCALKUBE := python3 $(ROOT)/tests/localkube/localkube.py
# held (shared) by the T3 tests while they run; `localkube.py stop` (make down) waits for it (exclusive)
export LOCALKUBE_USERS_LOCK := /run/lock/hpc-slurm-k8s-localkube-users.lock
# the kubectl that tests/localkube/build.sh built (the kubectl connection plugin runs it from PATH)
KUBE_BIN = $(shell bash $(ROOT)/tests/localkube/build.sh --print 2>/dev/null | sed -n 's/^kubernetes=//p')
VERSION := $(shell awk '/^version:/ { print $$2 }' $(ROOT)/galaxy.yml)

.PHONY: test checks deps sanity units lint static integration localkube e2e e2e-and-readme molecule-then-readme k8s molecule readme up down slurm-parameters clean

## test: every tier, then README's own commands (`make up` ... `make down`, which stops the local
## Kubernetes: last). The checks without a cluster (T0, T1, T2) run two at a time: each of them keeps one
## core busy, and T0's manifests and T2's Slurm daemons share nothing (other ports and directories; one
## munged). Then T3 beside Molecule and README's commands (make e2e-and-readme).
test: deps
	@date -u +'make test: checks start at %T'
	$(MAKE) -j2 --output-sync=target checks
	@date -u +'make test: e2e-and-readme starts at %T'
	$(MAKE) e2e-and-readme
	@date -u +'make test: ends at %T'
	@echo "make test: all tiers passed"

## checks: every tier that needs no Kubernetes; the two longest first, so that they run side by side
checks: static integration sanity units lint

## deps: Debian packages, the venv, the collections we depend on, and the local Kubernetes built from
## its Go modules (tests/localkube/build.sh; cached by version, a second run builds nothing)
deps:
	bash tests/ci/bootstrap.sh
	bash tests/localkube/build.sh

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

## localkube: Docker (it builds the images) and the local Kubernetes (tests/localkube), started if not running
localkube:
	tests/images/start-docker.sh
	$(LOCALKUBE) start

## e2e: the T3 tests and the Molecule scenarios at once, each cluster in its own namespace (they spend
## most of their time waiting for pods and jobs; output is printed per target when it ends)
e2e: localkube
	$(MAKE) -j2 --output-sync=target k8s molecule

## e2e-and-readme: as e2e, with README's commands after Molecule in its lane (the T3 tests take longer
## than Molecule); `make down` stops the local Kubernetes: its teardown of the demo cluster runs at once,
## the stop itself only once the T3 tests have released the lock they hold on it (LOCALKUBE_USERS_LOCK)
e2e-and-readme: localkube
	$(MAKE) -j2 --output-sync=target k8s molecule-then-readme

molecule-then-readme: localkube
	@date -u +'molecule-then-readme: molecule starts at %T'
	$(MAKE) molecule
	@date -u +'molecule-then-readme: readme starts at %T'
	$(MAKE) readme
	@date -u +'molecule-then-readme: readme ends at %T'

## k8s: T3, the collection on a real Kubernetes (tests/localkube, host processes on this machine):
## site.yml through the API, day-2 playbooks, power saving, render mode, bad input, Azimuth; three
## test modules (three Slurm clusters) at a time
k8s: localkube
	flock --shared $(LOCALKUBE_USERS_LOCK) $(PYTEST) tests/k8s -q -n 3 --dist loadfile --durations=40

## molecule: the scenarios default, existing and upgrade on the same local Kubernetes and the same Slurm
## cluster. `existing` runs on the cluster that `default` deployed and leaves (--destroy never), as a site runs
## it on a cluster that is already up: its converge must keep that cluster (idempotence, a job through the login
## pod). `upgrade` then upgrades that cluster: its create copies the images of the new tag into the Kubernetes,
## its verify refuses while a job runs and upgrades once it has ended, and its destroy is the collection's
## teardown. A deployment from scratch is what `default` just proved on this same Kubernetes; a second one (the
## upgrade scenario's converge) and its teardown would only cost CI time (about 5 minutes of the CPU-bound
## tier). On kind (T4) each scenario deploys its own cluster and runs its whole sequence.
molecule: export MOLECULE_GLOB := molecule/*/molecule.yml
molecule: export MOLECULE_CLUSTER := localkube
molecule: export KUBECONFIG := /var/lib/hpc-localkube/admin.kubeconfig
molecule: localkube
	# a run that stopped (or `--destroy never`) leaves its state: the next `test` would skip `create`,
	# where the images are loaded into the Kubernetes, which may be a new one since
	PATH=$(KUBE_BIN):$$PATH molecule reset -s default -s existing -s upgrade
	PATH=$(KUBE_BIN):$$PATH molecule test -s default --destroy never
	# `existing`: the cluster KUBECONFIG names, with the images default's create step loaded
	# (this machine's settings, as a site's own vars file: StorageClass, database image, small requests)
	PATH=$(KUBE_BIN):$$PATH SLURM_K8S_VARS=$(ROOT)/molecule/vars/localkube.yml molecule test -s existing
	# `upgrade` on that cluster (the same variables, molecule/vars/localkube.yml, as default's): the images
	# of the new tag, the refusal and the upgrade, then the teardown (forced, volumes included)
	PATH=$(KUBE_BIN):$$PATH molecule syntax -s upgrade
	PATH=$(KUBE_BIN):$$PATH molecule create -s upgrade
	# (as `molecule test` does, the teardown runs also when the verify fails)
	PATH=$(KUBE_BIN):$$PATH molecule verify -s upgrade || { PATH=$(KUBE_BIN):$$PATH molecule destroy -s upgrade; exit 1; }
	PATH=$(KUBE_BIN):$$PATH molecule destroy -s upgrade

## readme: the commands README.md shows a newcomer, run as written (make up, ssh, kubectl, make down)
readme:
	$(PYTEST) tests/readme -q

## up: a Slurm cluster on this machine in one command: the local Kubernetes, the images, site.yml,
## a first job (tests/localkube/up.sh; `make down` removes it)
up: deps
	bash tests/localkube/up.sh

down:
	bash tests/localkube/up.sh --down

## slurm-parameters: write plugins/plugin_utils/slurm_parameters.json (and its docs/slurm-parameters-table.md) from a clone of SchedMD's Slurm
## repository with its tags (docs/slurm-parameters.md): make slurm-parameters SLURM_REPO=/path/to/slurm
slurm-parameters:
	@test -n "$(SLURM_REPO)" || { echo "set SLURM_REPO to a clone of SchedMD/slurm (with tags)"; exit 2; }
	python3 tools/slurm_parameters.py $(SLURM_REPO) > plugins/plugin_utils/slurm_parameters.json.new
	mv plugins/plugin_utils/slurm_parameters.json.new plugins/plugin_utils/slurm_parameters.json
	python3 tools/slurm_parameters.py --markdown plugins/plugin_utils/slurm_parameters.json > docs/slurm-parameters-table.md

clean:
	rm -rf $(BUILD) tests/output
