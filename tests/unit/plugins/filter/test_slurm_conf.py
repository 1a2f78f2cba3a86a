# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm.conf values and lines (plugins/filter/slurm_conf.py), the one formatting used by slurm.conf.j2 and by
the power-save role's lines; tests/static/test_powersave.py reads the rendered values back from a real slurmctld."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.hpc.slurm_k8s.plugins.filter.slurm_conf import slurm_conf_line, slurm_conf_value


@pytest.mark.parametrize("value, expected", [
    (True, "YES"), (False, "NO"),
    (["Backfill", "Power"], "Backfill,Power"),
    ([True, False], "YES,NO"),
    (0, "0"), (1, "1"),  # numbers are not booleans
    ("bf_interval=30,default_queue_depth=100", "bf_interval=30,default_queue_depth=100"),
    ("INFINITE", "INFINITE"),
])
def test_values_as_slurm_reads_them(value, expected):
    assert slurm_conf_value(value) == expected


def test_a_partition_line_with_a_boolean_and_a_list():
    item = {"PartitionName": "gpu", "Nodes": "slurmd-gpu-[0-1]", "Default": False, "Hidden": True,
            "AllowGroups": ["physics", "chemistry"], "MaxTime": None, "Weight": 10}
    assert slurm_conf_line(item, "PartitionName") == \
        "PartitionName=gpu Nodes=slurmd-gpu-[0-1] Default=NO Hidden=YES AllowGroups=physics,chemistry Weight=10"


def test_the_naming_key_comes_first_whatever_the_order():
    assert slurm_conf_line({"State": "CLOUD", "NodeName": "slurmd-burst-0", "CPUs": 2}, "NodeName") == \
        "NodeName=slurmd-burst-0 State=CLOUD CPUs=2"


def test_a_line_without_its_naming_key_is_an_error():
    with pytest.raises(AnsibleFilterError, match="expected a dict with the key NodeName"):
        slurm_conf_line({"CPUs": 2}, "NodeName")
