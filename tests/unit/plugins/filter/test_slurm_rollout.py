# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan of a Slurm-aware rollout: pods out of date, how many at once, idle nodes first."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.hpc.slurm_k8s.plugins.filter.slurm_rollout import (
    k8s_outdated_burst_pods, k8s_outdated_pods, k8s_pod_refs, k8s_ready_pods, slurm_maintenance_window,
    slurm_max_unavailable, slurm_rollout_batches)


def statefulset(replicas=3, revision="slurmd-new", generation=4, observed=4):
    return {"metadata": {"name": "slurmd", "generation": generation},
            "spec": {"replicas": replicas},
            "status": {"observedGeneration": observed, "updateRevision": revision, "currentRevision": "slurmd-old"}}


def pod(name, revision, ready=True, deleting=False):
    meta = {"name": name, "labels": {"controller-revision-hash": revision}}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-02T10:00:00Z"
    return {"metadata": meta, "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def node(name, state="idle", cpus_allocated=0, flags=()):
    return {"name": name, "state": state, "cpus_allocated": cpus_allocated, "flags": list(flags)}


@pytest.mark.parametrize("value, replicas, expected", [
    (1, 4, 1), (4, 4, 4), ("2", 4, 2), ("25%", 4, 1), ("50%", 4, 2), ("100%", 3, 3),
    ("10%", 4, 1),        # rounded down, at least one
    ("34%", 10, 3),
    (1, 0, 1),            # no worker: nothing to replace, the setting is still valid
])
def test_max_unavailable(value, replicas, expected):
    assert slurm_max_unavailable(value, replicas) == expected


@pytest.mark.parametrize("value, replicas, message", [
    (0, 4, "within 1-4"), (5, 4, "within 1-4 (slurmd_replicas), got 5"), ("0%", 4, "percentage"),
    ("150%", 4, "percentage"), ("half", 4, "got 'half'"), (True, 4, "boolean"), (-1, 4, "within 1-4"),
])
def test_max_unavailable_refused(value, replicas, message):
    with pytest.raises(AnsibleFilterError, match="slurmd_rollout_max_unavailable") as error:
        slurm_max_unavailable(value, replicas)
    assert message in str(error.value)


def test_outdated_pods_in_ordinal_order():
    pods = [pod("slurmd-10", "slurmd-old"), pod("slurmd-2", "slurmd-old"), pod("slurmd-1", "slurmd-new"),
            pod("slurmd-0", "slurmd-old", deleting=True),          # on its way out
            pod("slurmd-11", "slurmd-old"),                        # above the replicas: scaled away
            pod("login-0", "slurmd-old")]
    assert k8s_outdated_pods(pods, statefulset(replicas=11)) == ["slurmd-2", "slurmd-10"]


def test_outdated_pods_wait_for_the_controller():
    with pytest.raises(AnsibleFilterError, match="not observed generation 5"):
        k8s_outdated_pods([], statefulset(generation=5, observed=4))


def test_ready_pods_count_only_the_new_revision():
    pods = [pod("slurmd-0", "slurmd-new"), pod("slurmd-1", "slurmd-old"), pod("slurmd-2", "slurmd-new", ready=False),
            pod("slurmd-3", "slurmd-new", deleting=True)]
    assert k8s_ready_pods(pods, "slurmd-new") == ["slurmd-0"]


def test_pod_refs():
    assert k8s_pod_refs(["slurmd-0"]) == [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "slurmd-0"}}]


def test_batches_idle_first_then_least_loaded():
    nodes = [node("slurmd-0", "allocated", 4), node("slurmd-1", "mixed", 1), node("slurmd-2"),
             node("slurmd-3", "idle", 0, ["drain"]), node("slurmd-5", "idle", 0, ["completing"])]
    outdated = ["slurmd-0", "slurmd-1", "slurmd-2", "slurmd-3", "slurmd-4", "slurmd-5"]
    # slurmd-4 is not registered (its pod never came up): no job can be on it
    assert slurm_rollout_batches(outdated, nodes, 2) == [["slurmd-2", "slurmd-3"], ["slurmd-4", "slurmd-5"],
                                                         ["slurmd-1", "slurmd-0"]]
    assert slurm_rollout_batches(outdated, nodes, 6) == [["slurmd-2", "slurmd-3", "slurmd-4", "slurmd-5", "slurmd-1",
                                                          "slurmd-0"]]


def test_no_batch_when_nothing_is_outdated():
    assert slurm_rollout_batches([], [node("slurmd-0")], 1) == []


def _burst(name, group, digest=None, **extra):
    meta = {"name": name, "labels": {"hpc.slurm-k8s/burst-group": group}}
    if digest is not None:
        meta["annotations"] = {"hpc.slurm-k8s/pod-template": digest}
    meta.update(extra.pop("meta", {}))
    return dict({"metadata": meta, "status": {"phase": "Running"}}, **extra)


def test_outdated_burst_pods_by_their_groups_template_digest():
    files = {"config.json": "{}", "resume": "#!/bin/sh\n",
             "pod-gpu.json": json.dumps({"kind": "Pod", "metadata": {"annotations": {"hpc.slurm-k8s/pod-template": "new"}}}),
             "pod-cpu.json": json.dumps({"kind": "Pod", "metadata": {"annotations": {"hpc.slurm-k8s/pod-template": "same"}}})}
    pods = [_burst("slurmd-gpu-10", "gpu", "old"), _burst("slurmd-gpu-2", "gpu"),   # old, and before the digest
            _burst("slurmd-gpu-1", "gpu", "new"), _burst("slurmd-cpu-0", "cpu", "same"),
            _burst("slurmd-gpu-3", "gpu", "old", meta={"deletionTimestamp": "2026-12-03T04:00:00Z"}),
            _burst("slurmd-gpu-4", "gpu", "old", status={"phase": "Failed"}),
            _burst("slurmd-gone-0", "gone", "old")]                                # a group removed
    assert k8s_outdated_burst_pods(pods, files) == ["slurmd-gpu-2", "slurmd-gpu-10"]
    assert k8s_outdated_burst_pods([], files) == []


def test_outdated_burst_pods_refuse_what_is_not_the_configmap():
    with pytest.raises(AnsibleFilterError, match="expects the data of the power-save ConfigMap"):
        k8s_outdated_burst_pods([], None)
    with pytest.raises(AnsibleFilterError, match="pod-gpu.json of the power-save ConfigMap is not JSON"):
        k8s_outdated_burst_pods([], {"pod-gpu.json": "{"})


def job(job_id, time_left, end_time="2026-12-03T12:00:00"):
    return {"job_id": job_id, "state": "running", "time_left": time_left, "end_time": end_time}


@pytest.mark.parametrize("jobs, expected", [
    ([], {"jobs": 0, "seconds": 0, "last_job": None, "ends_at": None, "unlimited": []}),
    # squeue's %L spellings: minutes:seconds, hours:minutes:seconds, days-hours:minutes:seconds
    ([job("7", "58:58", "2026-12-03T10:58:58"), job("8", "1-02:03:04", "2026-12-04T12:03:04"), job("9", "2:00:00")],
     {"jobs": 3, "seconds": 93784, "last_job": "8", "ends_at": "2026-12-04T12:03:04", "unlimited": []}),
    ([job("7", "0:05")], {"jobs": 1, "seconds": 5, "last_job": "7", "ends_at": "2026-12-03T12:00:00", "unlimited": []}),
    # a job without a time limit: the window cannot be computed
    ([job("7", "58:58"), job("8", "UNLIMITED")],
     {"jobs": 2, "seconds": None, "last_job": None, "ends_at": None, "unlimited": ["8"]}),
])
def test_maintenance_window_starts_when_the_job_with_most_time_left_reaches_its_limit(jobs, expected):
    assert slurm_maintenance_window(jobs) == expected
