# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures for tier T2: the collection's modules run through ansible against real Slurm daemons."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
# the collection as `make deps` installs it (ansible_collections/hpc/slurm_k8s), for the tests that import its
# plugin_utils (test_slurm_parameters.py); in this process only: the ansible processes find it themselves
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / ".cache" / "collections"))
from slurmhost import ModuleRunner, SlurmHostCluster  # noqa: E402

REQUIRED = ("slurmctld", "slurmd", "slurmdbd", "scontrol", "squeue", "munged", "mariadbd", "ansible")


def _missing_tools():
    return [tool for tool in REQUIRED if not shutil.which(tool) and not Path("/usr/sbin", tool).exists()]


@pytest.fixture(scope="session")
def cluster():
    missing = _missing_tools()
    if missing:
        message = "real Slurm daemons need %s (make deps installs them)" % ", ".join(missing)
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    # Not under pytest's basetemp: pytest keeps that 0700 (and resets it when another session
    # starts), which the SlurmUser that slurmctld switches to cannot traverse.
    workdir = Path(os.environ.get("SLURMHOST_DIR") or tempfile.mkdtemp(prefix="hpc-slurmhost-"))
    workdir.chmod(0o755)
    started = time.monotonic()
    host = SlurmHostCluster(workdir / "cluster", nodes=4).start()
    print("\nslurmhost: 4-node Slurm 22.05 cluster with accounting up in %.1f s" % (time.monotonic() - started))
    yield host
    host.stop()
    if not os.environ.get("SLURMHOST_DIR"):
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(autouse=True)
def _clean_nodes(request):
    if "cluster" in request.fixturenames:
        request.getfixturevalue("cluster").reset_nodes()


@pytest.fixture
def run_module(cluster):
    return ModuleRunner(cluster)
