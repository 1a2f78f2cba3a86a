# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The reasons a failed rollout reports for its pods, from pod statuses shaped as the API server
returns them (the Insufficient cpu case is the one make test met on a 2-CPU node)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.hpc.slurm_k8s.plugins.filter.k8s_pods import (
    k8s_file_sums, k8s_not_ready_message, k8s_pod_annotations, k8s_pod_problems, k8s_pods_mounting)


def pod(name, conditions=(), containers=(), init=(), phase="Pending", deleting=False):
    meta = {"name": name, "namespace": "slurm"}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T11:00:00Z"
    return {"metadata": meta, "status": {"phase": phase, "conditions": list(conditions),
                                         "containerStatuses": list(containers), "initContainerStatuses": list(init)}}


def condition(kind, status, message=None, reason=None):
    return dict({"type": kind, "status": status}, **{k: v for k, v in (("message", message), ("reason", reason)) if v})


READY = [condition("PodScheduled", "True"), condition("Ready", "True")]
SCHEDULED = [condition("PodScheduled", "True"), condition("Ready", "False", reason="ContainersNotReady")]


@pytest.mark.parametrize("pods,expected", [
    ([], []),
    (None, []),
    ([pod("slurmctld-0", READY, phase="Running")], []),
    ([pod("slurmd-1", [condition("PodScheduled", "False", reason="Unschedulable",
                                 message="0/1 nodes are available: 1 Insufficient cpu.")])],
     ["slurmd-1 (not scheduled: 0/1 nodes are available: 1 Insufficient cpu.)"]),
    ([pod("login-7d9", SCHEDULED, [{"name": "login", "ready": False,
                                    "state": {"waiting": {"reason": "ErrImageNeverPull",
                                                          "message": "image \"x:1\" is not present"}}}])],
     ["login-7d9 (container login waiting: ErrImageNeverPull image \"x:1\" is not present)"]),
    ([pod("slurmdbd-0", SCHEDULED, [{"name": "slurmdbd", "ready": False, "restartCount": 4,
                                     "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}], phase="Running")],
     ["slurmdbd-0 (container slurmdbd exited 1 (Error))"]),
    ([pod("slurmd-0", SCHEDULED, [{"name": "slurmd", "ready": False, "restartCount": 0, "state": {"running": {}}}],
          init=[{"name": "setup", "ready": False, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}],
          phase="Running")],
     ["slurmd-0 (container slurmd running, not ready (restarts: 0))"]),
    ([pod("mariadb-0", SCHEDULED, init=[{"name": "setup", "state": {"terminated": {"exitCode": 2}}}])],
     ["mariadb-0 (container setup exited 2 (no reason given))"]),
    ([pod("slurmd-1", READY, phase="Running", deleting=True), pod("slurmd-0", SCHEDULED, phase="Running",
                                                                  deleting=True)],
     ["slurmd-0 (being deleted)"]),
    # a pod the kubelet has not reported on yet; sorted by name
    ([pod("b", []), pod("a", [condition("PodScheduled", "True")])], ["a (Pending)", "b (Pending)"]),
])
def test_pod_problems(pods, expected):
    assert k8s_pod_problems(pods) == expected


def test_not_ready_message_names_each_pod_and_how_to_see_more():
    pods = [pod("slurmd-1", [condition("PodScheduled", "False", message="0/1 nodes are available")]),
            pod("slurmd-0", READY, phase="Running")]
    assert k8s_not_ready_message(pods, "hpc") == (
        "Pods of the cluster that are not ready: slurmd-1 (not scheduled: 0/1 nodes are available)"
        " (kubectl -n hpc describe pod NAME shows more).")
    assert k8s_not_ready_message([pod("slurmd-0", READY, phase="Running")], "hpc") == ""
    assert k8s_not_ready_message(None, "hpc") == ""


def test_not_a_list_is_an_error():
    with pytest.raises(AnsibleFilterError, match="expects a list of pods"):
        k8s_pod_problems({"kind": "Pod"})


def test_pod_annotations_patch_the_live_pods_only():
    pods = [
        {"metadata": {"name": "slurmd-0", "namespace": "slurm"}, "status": {"phase": "Running"}},
        {"metadata": {"name": "slurmd-1", "namespace": "slurm"}, "status": {"phase": "Pending"}},
        {"metadata": {"name": "old", "namespace": "slurm", "deletionTimestamp": "2026-12-02T00:00:00Z"},
         "status": {"phase": "Running"}},
        {"metadata": {"name": "done", "namespace": "slurm"}, "status": {"phase": "Succeeded"}},
    ]
    assert k8s_pod_annotations(pods, {"hpc.slurm-k8s/users-sha256": "abc"}) == [
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": name, "namespace": "slurm", "annotations": {"hpc.slurm-k8s/users-sha256": "abc"}}}
        for name in ("slurmd-0", "slurmd-1")]
    with pytest.raises(AnsibleFilterError):
        k8s_pod_annotations({"kind": "Pod"}, {})


def test_pods_mounting_a_configmap_with_the_container_that_sees_it():
    def pod(name, volumes, containers, phase="Running", ready=True):
        return {"metadata": {"name": name},
                "status": {"phase": phase, "containerStatuses": [{"name": c["name"], "ready": ready} for c in containers]},
                "spec": {"volumes": volumes, "containers": containers}}
    users = {"name": "users", "configMap": {"name": "slurm-users"}}
    pods = [
        pod("slurmd-0", [users], [{"name": "slurmd", "volumeMounts": [{"name": "users", "mountPath": "/x"}]}]),
        # the volume in the second container only
        pod("login-1", [users], [{"name": "side"}, {"name": "login", "volumeMounts": [{"name": "users", "mountPath": "/x"}]}]),
        pod("mariadb-0", [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}], [{"name": "mariadb"}]),
        pod("slurmd-9", [users], [{"name": "slurmd", "volumeMounts": [{"name": "users", "mountPath": "/x"}]}], "Failed"),
        # starting (reads the files as they are then), or running but not ready (e.g. crash looping)
        pod("slurmd-7", [users], [{"name": "slurmd", "volumeMounts": [{"name": "users", "mountPath": "/x"}]}], "Pending"),
        pod("slurmd-8", [users], [{"name": "slurmd", "volumeMounts": [{"name": "users", "mountPath": "/x"}]}], ready=False),
        # a Secret of the same name is another object
        pod("other", [{"name": "users", "secret": {"secretName": "slurm-users"}}],
            [{"name": "c", "volumeMounts": [{"name": "users", "mountPath": "/x"}]}]),
    ]
    found = k8s_pods_mounting(pods, "ConfigMap", "slurm-users")
    assert found == [{"name": "slurmd-0", "container": "slurmd"}, {"name": "login-1", "container": "login"}]
    assert [p["metadata"]["name"] for p in k8s_pod_annotations(found, {"a": 1}, "ns")] == ["slurmd-0", "login-1"]
    first = k8s_pod_annotations(found, {"a": 1}, "ns")[0]["metadata"]
    assert first == {"name": "slurmd-0", "namespace": "ns", "annotations": {"a": "1"}}
    with pytest.raises(AnsibleFilterError):
        k8s_pods_mounting(pods, "Pod", "x")


def test_pods_mounting_a_secret_projected_beside_a_configmap():
    """cluster_auth_type slurm: the key set is a source of the projected `config` volume, beside the ConfigMap"""
    config = {"name": "config", "projected": {"sources": [
        {"configMap": {"name": "slurm-config"}},
        {"secret": {"name": "slurm-auth-key", "items": [{"key": "slurm.jwks", "path": "slurm.jwks", "mode": 256}]}}]}}
    mounted = [{"name": "slurmd", "volumeMounts": [{"name": "config", "mountPath": "/etc/slurm-k8s/config"}]}]
    pods = [
        {"metadata": {"name": "slurmd-0"}, "status": {"phase": "Running", "containerStatuses": [{"name": "slurmd", "ready": True}]},
         "spec": {"volumes": [config], "containers": mounted}},
        # a plain Secret volume of another name
        {"metadata": {"name": "slurmrestd-x"}, "status": {"phase": "Running", "containerStatuses": [{"name": "slurmd", "ready": True}]},
         "spec": {"volumes": [{"name": "config", "secret": {"secretName": "slurm-jwt-key"}}], "containers": mounted}},
    ]
    assert k8s_pods_mounting(pods, "Secret", "slurm-auth-key") == [{"name": "slurmd-0", "container": "slurmd"}]
    assert k8s_pods_mounting(pods, "ConfigMap", "slurm-config") == [{"name": "slurmd-0", "container": "slurmd"}]
    assert k8s_pods_mounting(pods, "Secret", "slurm-config") == []


def test_file_sums_are_what_sha256sum_prints_for_the_files():
    # (the shell's order in the C locale: upper case before lower case, "." before letters)
    files = {"passwd": "bob:*:3001:3000::/home/bob:/bin/bash\n", "Zeta.conf": "", "bob.authorized_keys": "k\n"}
    assert k8s_file_sums(files) == [
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  Zeta.conf",
        "%s  bob.authorized_keys" % hashlib.sha256(b"k\n").hexdigest(),
        "%s  passwd" % hashlib.sha256(files["passwd"].encode()).hexdigest()]
    with pytest.raises(AnsibleFilterError):
        k8s_file_sums(["passwd"])
