# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over manifests (plugins/filter/k8s_manifests.py): an include's batches for the render
directory, with the one NetworkPolicy rule of every role, and checkov's skip annotations."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.hpc.slurm_k8s.plugins.filter.k8s_manifests import k8s_batches, k8s_checkov_annotations

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
