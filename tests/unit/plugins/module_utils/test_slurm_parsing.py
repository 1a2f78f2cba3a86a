# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.hpc.slurm_k8s.plugins.module_utils._slurm_jobs import parse_squeue
from ansible_collections.hpc.slurm_k8s.plugins.module_utils._slurm_runner import SlurmError
from ansible_collections.hpc.slurm_k8s.plugins.module_utils._slurm_nodes import (
    drain_state,
    owner_tag,
    parse_oneliner,
    parse_state,
)


@pytest.mark.parametrize("line, reason, user, time", [
    ("NodeName=n1 State=IDLE+DRAIN Reason=bad disk [alice@2026-11-28T10:00:00]", "bad disk", "alice", "2026-11-28T10:00:00"),
    # free text with brackets and '=' inside the reason
    ("NodeName=n1 State=IDLE+DRAIN Reason=rack [b] A=b [root@2026-11-29T23:10:13] Comment=x", "rack [b] A=b", "root", "2026-11-29T23:10:13"),
    ("NodeName=n1 State=DOWN Reason=no stamp Comment=x", "no stamp", None, None),
])
def test_reason_is_cut_out_whole(line, reason, user, time):
    fields = parse_oneliner(line)
    assert (fields["Reason"], fields["_ReasonUser"], fields["_ReasonTime"]) == (reason, user, time)
    assert fields["State"].startswith(("IDLE", "DOWN"))


def test_first_occurrence_wins_over_free_text_later_in_the_line():
    fields = parse_oneliner("NodeName=n1 OS=Linux 6.1 #1 SMP State=IDLE Comment=State=DOWN Extra=x", {"State", "NodeName"})
    assert fields == {"NodeName": "n1", "State": "IDLE"}


@pytest.mark.parametrize("raw, base, flags, drain", [
    ("IDLE", "idle", [], None),
    ("MIXED+DRAIN", "mixed", ["drain"], "draining"),
    ("IDLE+DRAIN+COMPLETING", "idle", ["drain", "completing"], "draining"),
    ("IDLE+DRAIN+DYNAMIC_NORM", "idle", ["drain", "dynamic_norm"], "drained"),
    ("DOWN*+DRAIN", "down", ["drain"], "drained"),
    ("IDLE~", "idle", [], None),
])
def test_state_and_drain_state(raw, base, flags, drain):
    assert parse_state(raw) == (base, flags)
    assert drain_state(base, flags) == drain


@pytest.mark.parametrize("reason, tag", [
    ("hpc.slurm_k8s:upgrade to 24.11", "upgrade"),
    ("hpc.slurm_k8s:scale", "scale"),
    ("hpc.slurm_k8s: spaced", None),
    ("bad disk", None),
    (None, None),
])
def test_owner_tag(reason, tag):
    assert owner_tag(reason) == tag


def test_squeue_job_name_may_hold_the_separator():
    jobs = parse_squeue("5|RUNNING|bob|p|n1|None|t|t|0:01|1:00:00|59:59|t|a|b|c\n")
    assert jobs[0]["name"] == "a|b|c" and jobs[0]["time_left"] == "59:59" and jobs[0]["state"] == "running"


def test_squeue_unexpected_line_is_an_error_not_an_empty_queue():
    with pytest.raises(SlurmError):
        parse_squeue("something else entirely\n")
