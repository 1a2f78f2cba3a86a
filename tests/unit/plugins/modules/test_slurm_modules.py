# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.hpc.slurm_k8s.plugins.modules import slurm_accounting, slurm_job_info, slurm_node, slurm_node_info
from ansible_collections.hpc.slurm_k8s.tests.unit.plugins.modules.module_cases import load_cases, run_case

HERE = os.path.dirname(__file__)


@pytest.mark.parametrize("case", load_cases(os.path.join(HERE, "test_slurm_node.yaml")))
def test_slurm_node(case, capsys, monkeypatch):
    run_case(slurm_node.main, case, capsys, monkeypatch)


@pytest.mark.parametrize("case", load_cases(os.path.join(HERE, "test_slurm_node_info.yaml")))
def test_slurm_node_info(case, capsys, monkeypatch):
    run_case(slurm_node_info.main, case, capsys, monkeypatch)


@pytest.mark.parametrize("case", load_cases(os.path.join(HERE, "test_slurm_job_info.yaml")))
def test_slurm_job_info(case, capsys, monkeypatch):
    run_case(slurm_job_info.main, case, capsys, monkeypatch)


@pytest.mark.parametrize("case", load_cases(os.path.join(HERE, "test_slurm_accounting.yaml")))
def test_slurm_accounting(case, capsys, monkeypatch):
    run_case(slurm_accounting.main, case, capsys, monkeypatch)
