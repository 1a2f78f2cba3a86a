# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which slurmd have not come back from `scontrol reconfigure`, from slurmctld's SlurmdStartTime."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.hpc.slurm_k8s.plugins.filter.slurm_reconfigure import slurm_nodes_not_reconfigured

# `scontrol show node --oneliner` of Debian's 24.11.5 and 26.05.5 daemons (tests/k8s), one line per node;
# {state} and {start} are replaced per case
LINES = {
    "24.11": "NodeName={name} Arch=x86_64 CoresPerSocket=1 CPUAlloc=1 CPUEfctv=2 CPUTot=2 CPULoad=0.00 "
             "AvailableFeatures=k8s ActiveFeatures=k8s Gres=(null) NodeAddr=10.244.1.7 NodeHostName={name} "
             "Version=24.11.5 OS=Linux 6.1.0-28-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1 RealMemory=1800 "
             "AllocMem=100 FreeMem=1500 Sockets=2 Boards=1 State={state} ThreadsPerCore=1 TmpDisk=0 Weight=1 "
             "Owner=N/A MCS_label=N/A Partitions=compute BootTime=2026-11-29T22:59:07 SlurmdStartTime={start} "
             "LastBusyTime=2026-11-29T23:10:10 ResumeAfterTime=None CfgTRES=cpu=2,mem=1800M,billing=2 "
             "AllocTRES=cpu=1,mem=100M CurrentWatts=0 AveWatts=0",
    "26.05": "NodeName={name} Arch=x86_64 CoresPerSocket=1  CPUAlloc=1 CPUEfctv=2 CPUTot=2 CPULoad=3.47 "
             "AvailableFeatures=k8s ActiveFeatures=k8s Gres=(null) NodeAddr=10.244.0.194 NodeHostName={name} "
             "Version=26.05.5 OS=Linux 6.18.44-fc-v1252 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=921 AllocMem=256 "
             "FreeMem=18759 Sockets=2 Boards=1 State={state} ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A "
             "MCS_label=N/A Partitions=compute  BootTime=2026-12-04T16:47:30 SlurmdStartTime={start} "
             "LastBusyTime=2026-12-04T16:50:47 ResumeAfterTime=None SuspendTime=INFINITE "
             "CfgTRES=cpu=2,mem=921M,billing=2 AllocTRES=cpu=1,mem=256M CurrentWatts=0 AveWatts=0",
}
OLD = "2026-12-05T01:26:26"   # SlurmdStartTime before the reconfigure
NEW = "2026-12-05T01:27:52"   # and once the slurmd re-executed


def show(version, *nodes):
    return "\n".join(LINES[version].format(name=name, state=state, start=start) for name, state, start in nodes) + "\n"


@pytest.mark.parametrize("version", sorted(LINES))
def test_a_node_is_done_once_its_slurmd_start_time_moves(version):
    before = show(version, ("slurmd-0", "IDLE", OLD), ("slurmd-1", "MIXED+DRAIN", OLD))
    assert slurm_nodes_not_reconfigured(before, before) == ["slurmd-0", "slurmd-1"]
    halfway = show(version, ("slurmd-0", "IDLE", NEW), ("slurmd-1", "MIXED+DRAIN", OLD))
    assert slurm_nodes_not_reconfigured(halfway, before) == ["slurmd-1"]
    done = show(version, ("slurmd-0", "IDLE", NEW), ("slurmd-1", "MIXED+DRAIN", NEW))
    assert slurm_nodes_not_reconfigured(done, before) == []


def test_no_start_time_after_the_reconfigure_is_not_yet_done():
    """As seen on 24.11: right after slurmctld re-executed, a dynamic node shows SlurmdStartTime=None until
    its slurmd registers again; a slurmd frozen (SIGSTOP) meanwhile became NOT_RESPONDING 15 s later."""
    before = show("24.11", ("slurmd-0", "IDLE+DYNAMIC_NORM", OLD), ("slurmd-1", "IDLE+DYNAMIC_NORM", OLD))
    restarted = show("24.11", ("slurmd-0", "IDLE+DYNAMIC_NORM", NEW), ("slurmd-1", "IDLE+DYNAMIC_NORM", "None"))
    assert slurm_nodes_not_reconfigured(restarted, before) == ["slurmd-1"]
    frozen = show("24.11", ("slurmd-0", "IDLE+DYNAMIC_NORM", NEW),
                  ("slurmd-1", "IDLE+DYNAMIC_NORM+NOT_RESPONDING", "None"))
    assert slurm_nodes_not_reconfigured(frozen, before) == []


@pytest.mark.parametrize("state", [
    "IDLE+NOT_RESPONDING", "DOWN+NOT_RESPONDING", "IDLE+CLOUD+POWERED_DOWN", "IDLE+CLOUD+POWERING_UP",
    "IDLE+CLOUD+POWERING_DOWN", "ALLOCATED+CLOUD+POWER_DOWN", "FUTURE", "UNKNOWN", "IDLE*", "DOWN*+DRAIN",
])
def test_a_node_the_reconfigure_does_not_reach_is_not_waited_for(state):
    before = show("24.11", ("burst-0", state, OLD), ("slurmd-0", "IDLE", OLD))
    assert slurm_nodes_not_reconfigured(show("24.11", ("burst-0", state, OLD), ("slurmd-0", "IDLE", NEW)), before) == []


def test_a_slurmd_never_started_is_not_waited_for():
    before = show("26.05", ("burst-0", "IDLE+CLOUD", "None"))
    assert slurm_nodes_not_reconfigured(before, before) == []


@pytest.mark.parametrize("after", [
    show("24.11", ("slurmd-0", "IDLE", NEW)),                             # slurmd-1 scaled away
    show("24.11", ("slurmd-0", "IDLE", NEW), ("slurmd-1", "IDLE+CLOUD+POWERING_DOWN", OLD)),   # power saving
    show("24.11", ("slurmd-0", "IDLE", NEW), ("slurmd-1", "IDLE+NOT_RESPONDING", OLD)),        # its pod gone
])
def test_a_node_that_leaves_during_the_wait_is_not_waited_for(after):
    before = show("24.11", ("slurmd-0", "IDLE", OLD), ("slurmd-1", "IDLE", OLD))
    assert slurm_nodes_not_reconfigured(after, before) == []


def test_a_node_registered_during_the_wait_is_not_waited_for():
    before = show("24.11", ("slurmd-0", "IDLE", OLD))
    after = show("24.11", ("slurmd-0", "IDLE", NEW), ("burst-0", "IDLE+CLOUD", NEW))
    assert slurm_nodes_not_reconfigured(after, before) == []


def test_free_text_after_the_state_cannot_hide_a_node():
    """The first SlurmdStartTime and State of a line count, not a word in a later Reason."""
    line = LINES["24.11"].format(name="slurmd-0", state="IDLE+DRAIN", start=OLD)
    before = line + " Reason=maintenance State=FUTURE SlurmdStartTime=None [root@2026-12-05T01:00:00]\n"
    assert slurm_nodes_not_reconfigured(before, before) == ["slurmd-0"]


@pytest.mark.parametrize("after, before", [(None, ""), ("", ["NodeName=x"])])
def test_anything_but_scontrol_text_is_refused(after, before):
    with pytest.raises(AnsibleFilterError, match="slurm_nodes_not_reconfigured: .* 'scontrol show node --oneliner'"):
        slurm_nodes_not_reconfigured(after, before)
