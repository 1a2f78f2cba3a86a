# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The resources role's skip-unchanged logic: what counts as up to date, drifted or not ready.

The live objects below are shaped as the API server returns them (defaults added, quantities
canonicalised, empty values dropped); tests/k8s proves the same against a real API server by
counting the write requests of a re-run in its audit log.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64

import pytest

from ansible_collections.hpc.slurm_k8s.plugins.plugin_utils._k8s_apply import (
    ApplyError,
    DIGEST_ANNOTATION,
    k8s_outdated,
    k8s_reads,
    k8s_stamp,
    k8s_unready,
)


def statefulset(cpu="1", memory="1024Mi", replicas=2, node_selector=None):
    spec = {"replicas": replicas, "template": {"spec": {
        "containers": [{"name": "slurmd", "image": "slurm:1", "ports": [{"containerPort": 6818}],
                        "resources": {"requests": {"cpu": cpu, "memory": memory},
                                      "limits": {"cpu": cpu, "memory": memory}}}],
        "nodeSelector": node_selector if node_selector is not None else {}}}}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "slurmd", "namespace": "slurm"},
            "spec": spec}


def as_served(manifest, **changes):
    """The live object the API server holds after applying `manifest`: with server defaults, canonical
    quantities and without empty maps; `changes` edit the container afterwards (drift)."""
    live = {"apiVersion": manifest["apiVersion"], "kind": manifest["kind"],
            "metadata": dict(manifest["metadata"], uid="u-1", resourceVersion="42", generation=1,
                             annotations=dict(manifest["metadata"]["annotations"])),
            "spec": {"replicas": manifest["spec"]["replicas"], "podManagementPolicy": "OrderedReady",
                     "template": {"spec": {"restartPolicy": "Always", "containers": [{
                         "name": "slurmd", "image": changes.get("image", "slurm:1"),
                         "terminationMessagePath": "/dev/termination-log",
                         "ports": [{"containerPort": 6818, "protocol": "TCP"}],
                         "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                       "limits": {"cpu": "1", "memory": "1Gi"}}}]}}},
            "status": {"observedGeneration": 1, "replicas": 2, "readyReplicas": 2, "updatedReplicas": 2}}
    return live


def test_an_unchanged_manifest_is_not_applied_again():
    stamped = k8s_stamp([statefulset()])
    assert k8s_outdated(stamped, [as_served(stamped[0])]) == []


def test_a_missing_object_is_applied():
    stamped = k8s_stamp([statefulset()])
    assert k8s_outdated(stamped, []) == stamped


def test_a_changed_manifest_is_applied_even_when_the_live_object_holds_it():
    # 2 -> 1 replicas removes nothing the live object lacks, but the digest differs
    old = k8s_stamp([statefulset(replicas=2)])[0]
    new = k8s_stamp([statefulset(replicas=1)])
    assert new[0]["metadata"]["annotations"][DIGEST_ANNOTATION] != old["metadata"]["annotations"][DIGEST_ANNOTATION]
    assert k8s_outdated(new, [as_served(old)]) == new


def test_a_field_edited_by_someone_else_is_put_back():
    stamped = k8s_stamp([statefulset()])
    assert k8s_outdated(stamped, [as_served(stamped[0], image="slurm:evil")]) == stamped


@pytest.mark.parametrize("wanted, served", [
    ("1024Mi", "1Gi"), ("0.5", "500m"), ("2", 2), ("1000m", "1"), ("1e3", "1k"),
])
def test_quantities_compare_by_value(wanted, served):
    stamped = k8s_stamp([statefulset(memory=wanted)])
    live = as_served(stamped[0])
    live["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["memory"] = served
    live["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"] = served
    assert k8s_outdated(stamped, [live]) == []


def test_different_quantities_differ():
    stamped = k8s_stamp([statefulset(memory="2Gi")])
    assert k8s_outdated(stamped, [as_served(stamped[0])]) == stamped


def test_an_extra_list_element_on_the_server_is_drift():
    stamped = k8s_stamp([statefulset()])
    live = as_served(stamped[0])
    live["spec"]["template"]["spec"]["containers"].append({"name": "sidecar", "image": "x"})
    assert k8s_outdated(stamped, [live]) == stamped


def test_secret_string_data_compares_with_the_served_base64_data():
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "slurm"},
              "type": "Opaque", "stringData": {"password": "s3cret"}}
    stamped = k8s_stamp([secret])
    live = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": stamped[0]["metadata"],
            "data": {"password": base64.b64encode(b"s3cret").decode()}}
    assert k8s_outdated(stamped, [live]) == []
    live["data"]["password"] = base64.b64encode(b"other").decode()
    assert k8s_outdated(stamped, [live]) == stamped


def test_the_stamp_leaves_the_input_alone_and_is_stable():
    manifest = statefulset()
    first, second = k8s_stamp([manifest]), k8s_stamp([statefulset()])
    assert "annotations" not in manifest["metadata"]
    assert first == second


def test_an_unstamped_manifest_is_an_error():
    with pytest.raises(ApplyError, match="StatefulSet/slurmd is not stamped"):
        k8s_outdated([statefulset()], [])


def test_reads_are_one_list_per_kind_and_namespace_and_by_name_when_cluster_scoped():
    definitions = [statefulset(), dict(statefulset(), metadata={"name": "other", "namespace": "slurm"}),
                   {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "slurm"}},
                   {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "slurm"}}]
    assert k8s_reads(definitions) == [
        {"api_version": "apps/v1", "kind": "StatefulSet", "namespace": "slurm"},
        {"api_version": "v1", "kind": "Service", "namespace": "slurm"},
        {"api_version": "v1", "kind": "Namespace", "name": "slurm"},
    ]


def test_unready_lists_only_the_unchanged_workloads_that_are_not_rolled_out():
    stamped = k8s_stamp([statefulset(), {"apiVersion": "v1", "kind": "Service",
                                         "metadata": {"name": "s", "namespace": "slurm"}}])
    live = as_served(stamped[0])
    assert k8s_unready(stamped, [live]) == []
    live["status"]["readyReplicas"] = 1
    assert k8s_unready(stamped, [live]) == [stamped[0]]
    # applied now: its apply task waited for it
    assert k8s_unready(stamped, [live], stamped[:1]) == []
    live["status"]["readyReplicas"], live["metadata"]["generation"] = 2, 2   # not yet observed
    assert k8s_unready(stamped, [live]) == [stamped[0]]
    assert k8s_unready(stamped, []) == [stamped[0]]                         # not there at all
