# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures for tier T2: the collection's modules run through ansible against real Slurm daemons."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from slurmhost import SlurmHostCluster  # noqa: E402

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


class ModuleRunner:
    """Runs one of our modules through `ansible localhost -m`, as a user's playbook would."""

    def __init__(self, cluster):
        self.cluster = cluster

    def __call__(self, module, args, check=False, diff=False):
        argv = ["ansible", "localhost", "-m", "hpc.slurm_k8s.%s" % module]
        if args:
            argv += ["-a", json.dumps(args)]
        if check:
            argv.append("--check")
        if diff:
            argv.append("--diff")
        # The minimal callback prints `localhost | CHANGED => {json}` (FAILED! for failures).
        env = dict(self.cluster.env, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.minimal",
                   ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        marker = proc.stdout.find("localhost | ")
        start = proc.stdout.find("=> ", marker) + 3 if marker >= 0 else -1
        try:
            result = json.JSONDecoder().raw_decode(proc.stdout[start:])[0]
        except ValueError:
            raise AssertionError("ansible printed no result (rc=%s):\n%s\n%s" % (proc.returncode, proc.stdout, proc.stderr))
        status = proc.stdout[marker + len("localhost | "):start].split()[0]
        result["failed"] = status in ("FAILED!", "UNREACHABLE!")
        assert result["failed"] == (proc.returncode != 0), (status, proc.returncode)
        return result


@pytest.fixture
def run_module(cluster):
    return ModuleRunner(cluster)
