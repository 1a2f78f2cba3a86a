# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which Slurm version changes are supported in place (SchedMD's upgrade guide), from `slurmctld -V`."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.hpc.slurm_k8s.plugins.filter.slurm_versions import slurm_version_change


@pytest.mark.parametrize("running, target, apart, supported", [
    # the output of the real daemons: Debian's 24.11 (trixie) and 26.05 (forky), upstream's 22.05
    ("slurm-wlm 24.11.5", "slurm-wlm 26.05.5", 3, True),      # 24.11 -> 25.05 -> 25.11 -> 26.05
    ("slurm-wlm 24.11.5", "slurm-wlm 24.11.7", 0, True),
    ("slurm 22.05.8", "slurm 23.11.10", 2, True),              # before 24.11: two majors back
    ("slurm 22.05.8", "slurm 24.05.1", 3, False),
    ("slurm 24.05.1", "slurm-wlm 26.05.5", 4, False),          # 26.05 reads 24.11, 25.05, 25.11 only
    ("slurm 23.11.1", "slurm 24.11.0", 2, True),
    ("slurm-wlm 26.05.5", "slurm-wlm 24.11.5", -3, False),     # a downgrade
    ("slurm-wlm 24.11.5", "slurm-wlm 24.11.4", 0, True),       # a maintenance release back: same state format
])
def test_the_window_of_the_target_major(running, target, apart, supported):
    change = slurm_version_change(running, target)
    assert (change["majors_apart"], change["supported"]) == (apart, supported)
    assert change["running"] in change["reason"] and change["target"] in change["reason"]


def test_the_reasons_name_the_versions_and_the_rule():
    assert "is a downgrade" in slurm_version_change("slurm-wlm 26.05.5", "slurm-wlm 24.11.5")["reason"]
    skip = slurm_version_change("slurm 24.05.1", "slurm-wlm 26.05.5")
    assert (skip["running_major"], skip["target_major"], skip["window"]) == ("24.05", "26.05", 3)
    assert "skips 3 major releases" in skip["reason"] and "previous 3 majors" in skip["reason"]
    assert "converts the accounting database" in slurm_version_change("slurm 24.11.5", "slurm 25.05.0")["reason"]


@pytest.mark.parametrize("text, message", [
    ("", "cannot read a Slurm version from the running"),
    ("exec format error", "cannot read a Slurm version from the running"),
    ("slurm 24.12.1", "24.12 is not a Slurm major release"),
])
def test_output_that_is_not_a_version_fails_closed(text, message):
    with pytest.raises(AnsibleFilterError, match=message):
        slurm_version_change(text, "slurm 24.11.5")
