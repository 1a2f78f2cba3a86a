# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over manifests (plugins/filter/k8s_manifests.py): an include's batches for the render
directory, with the one NetworkPolicy rule of every role, checkov's skip annotations, and the TCP probes of
every container that serves a port."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.hpc.slurm_k8s.plugins.filter.k8s_manifests import k8s_batches, k8s_checkov_annotations, k8s_tcp_probes

SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "munge-key", "namespace": "slurm"}}
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "slurmctld", "namespace": "slurm"}}
POLICY = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "slurmctld", "namespace": "slurm"}}


def test_secrets_apart_and_policies_kept_when_on():
    assert k8s_batches([SERVICE, SECRET, POLICY], "slurmctld") == {
        "secrets": [{"owner": "slurmctld", "state": "present", "definitions": [SECRET]}],
        "plain": [{"owner": "slurmctld", "state": "present", "definitions": [SERVICE, POLICY]},
                  {"owner": "slurmctld", "state": "absent", "definitions": []}]}


def test_policies_removed_when_off_and_nothing_moves_for_an_absent_batch():
    off = k8s_batches([SERVICE, POLICY], "login", "present", False)
    assert off["plain"] == [{"owner": "login", "state": "present", "definitions": [SERVICE]},
                            {"owner": "login", "state": "absent", "definitions": [POLICY]}]
    gone = k8s_batches([SERVICE, POLICY], "login", "absent", False)
    assert gone["plain"][0] == {"owner": "login", "state": "absent", "definitions": [SERVICE, POLICY]}
    assert gone["plain"][1]["definitions"] == []


def test_not_a_list_is_an_error():
    with pytest.raises(AnsibleFilterError, match="expected a list of manifests, got dict"):
        k8s_batches(SERVICE, "x")


def test_checkov_annotations_are_numbered_in_order_and_checked():
    assert k8s_checkov_annotations(["CKV_K8S_15=why", "CKV_K8S_43=because"]) == {
        "checkov.io/skip1": "CKV_K8S_15=why", "checkov.io/skip2": "CKV_K8S_43=because"}
    assert k8s_checkov_annotations([]) == {}
    with pytest.raises(AnsibleFilterError, match="CHECK_ID=reason"):
        k8s_checkov_annotations(["no reason"])


def test_tcp_probes_default_timing():
    tcp = {"tcpSocket": {"port": 22}}
    assert k8s_tcp_probes(22) == {
        "readinessProbe": dict(tcp, periodSeconds=5, timeoutSeconds=3),
        "livenessProbe": dict(tcp, periodSeconds=20, timeoutSeconds=5, failureThreshold=6)}


def test_tcp_probes_startup_covers_the_wait_rounded_up():
    # slurmctld: its wait for slurmdbd (SLURM_K8S_WAIT_TIMEOUT 300) plus 60 s, in 5 s periods
    assert k8s_tcp_probes(6817, startup_seconds=360)["startupProbe"] == {
        "tcpSocket": {"port": 6817}, "periodSeconds": 5, "failureThreshold": 72}
    assert k8s_tcp_probes(6817, startup_seconds=361)["startupProbe"]["failureThreshold"] == 73


def test_tcp_probes_overrides_add_change_and_remove_fields():
    # slurmd: its own readiness (exec), a lax liveness; the NFS server: no timeouts
    slurmd = k8s_tcp_probes(6818, startup_seconds=120, readiness=False,
                            liveness={"periodSeconds": 30, "timeoutSeconds": 10, "failureThreshold": 10})
    assert sorted(slurmd) == ["livenessProbe", "startupProbe"]
    assert slurmd["livenessProbe"] == {"tcpSocket": {"port": 6818}, "periodSeconds": 30, "timeoutSeconds": 10,
                                       "failureThreshold": 10}
    nfs = k8s_tcp_probes(2049, readiness={"periodSeconds": 10, "timeoutSeconds": None},
                         liveness={"initialDelaySeconds": 30, "timeoutSeconds": None})
    assert nfs["readinessProbe"] == {"tcpSocket": {"port": 2049}, "periodSeconds": 10}
    assert nfs["livenessProbe"] == {"tcpSocket": {"port": 2049}, "initialDelaySeconds": 30, "periodSeconds": 20,
                                    "failureThreshold": 6}


@pytest.mark.parametrize("port", [0, 65536, "22", True, None])
def test_tcp_probes_refuse_what_is_not_a_port(port):
    with pytest.raises(AnsibleFilterError, match="expected a port number"):
        k8s_tcp_probes(port)


def test_tcp_probes_refuse_overrides_that_are_not_a_dict():
    with pytest.raises(AnsibleFilterError, match="liveness must be a dict"):
        k8s_tcp_probes(22, liveness=[30])
