# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""images/slurm/slurmctld-state.sh on state directories that a killed slurmctld leaves (cases in the YAML file).

T3 (tests/k8s/test_cluster.py) kills a real slurmctld and shows that it starts again with every job; here each
layout of the files is checked exactly, including the ones a kill hits too rarely to reproduce on purpose."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "images" / "slurm" / "slurmctld-state.sh"
CASES = yaml.safe_load((Path(__file__).with_suffix(".yaml")).read_text())


def listing(directory):
    return {entry.name: entry.read_text() for entry in directory.iterdir()}


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_state_directory(case, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    for name, content in case["before"].items():
        (state / name).write_text(content)
    slurm_conf = tmp_path / "slurm.conf"
    slurm_conf.write_text(case.get("slurm_conf", "SlurmctldHost=slurmctld-0\nClusterName=faults # the test's\n"))
    proc = subprocess.run(["bash", str(SCRIPT), str(state), str(slurm_conf)], capture_output=True, text=True,
                          timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert listing(state) == case["after"]
    if case["log"] is None:
        assert proc.stderr == ""
    else:
        assert case["log"] in proc.stderr, proc.stderr


def test_without_arguments_it_says_what_it_needs():
    proc = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode != 0 and "usage: slurm-k8s-slurmctld-state STATE_DIR SLURM_CONF" in proc.stderr
