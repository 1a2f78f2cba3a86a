# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The k8s_apply action with the API replaced by fakes: which reads it makes, which kubernetes.core module
calls follow (exactly), and what it reports. tests/k8s runs it against a real API server (a re-run makes
no write request, counted in the audit log)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import copy
from unittest import mock

import pytest

from ansible.errors import AnsibleActionFail
from ansible_collections.hpc.slurm_k8s.plugins.action import k8s_apply
from ansible_collections.hpc.slurm_k8s.plugins.plugin_utils._k8s_apply import k8s_stamp

AUTH = {"kubeconfig": "/etc/kube.conf"}
CONFIG = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "slurm-config", "namespace": "slurm"},
          "data": {"slurm.conf": "ClusterName=x\n"}}
SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "slurm-munge", "namespace": "slurm"},
          "stringData": {"munge.key": "s3cr3t-key-material"}}
WORKERS = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "slurmd", "namespace": "slurm"},
           "spec": {"replicas": 2}}


def served(definition, ready=True):
    """The live object of a stamped manifest as the API server returns it (Secret data base64)."""
    live = copy.deepcopy(k8s_stamp([definition])[0])
    if live["kind"] == "Secret":
        live["data"] = {k: base64.b64encode(v.encode()).decode() for k, v in live.pop("stringData").items()}
    if live["kind"] == "StatefulSet":
        live["status"] = {"readyReplicas": 2 if ready else 1, "updatedReplicas": 2}
    return live


class ResourceNotFoundError(Exception):
    """As kubernetes.dynamic raises it for a kind the API server does not serve."""


class FakeApi:
    """The kubernetes.core.k8s lookup over a list of live objects, recording each query; the API serves every
    kind but those of `unserved`."""

    def __init__(self, live, unserved=()):
        self.live, self.queries, self.unserved = live, [], set(unserved)

    def run(self, terms, variables=None, **query):
        self.queries.append(query)
        if query["kind"] in self.unserved:
            raise ResourceNotFoundError("No matches found for {'api_version': %r, 'kind': %r}"
                                        % (query.get("api_version"), query["kind"]))
        return [obj for obj in self.live if obj["kind"] == query["kind"]
                and obj["metadata"].get("namespace") == query.get("namespace")
                and query.get("resource_name") in (None, obj["metadata"]["name"])]


def run_action(args, live, check_mode=False, module_results=None, unserved=()):
    """Run the action; return (result, lookup queries, module calls as (name, args))."""
    task = mock.MagicMock(args=args, check_mode=check_mode, async_val=0, diff=False)
    action = k8s_apply.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None,
                                    shared_loader_obj=None)
    api, calls = FakeApi(live, unserved), []
    results = list(module_results or [])

    def execute_module(module_name, module_args, task_vars):
        calls.append((module_name, module_args))
        return results.pop(0) if results else {"changed": True}

    action._execute_module = execute_module
    with mock.patch.object(k8s_apply.lookup_loader, "get", return_value=api):
        result = action.run(task_vars={})
    return result, api.queries, calls


def apply_call(definitions):
    return ("kubernetes.core.k8s", dict(
        state="present", definition=k8s_stamp(definitions), apply=True,
        server_side_apply={"field_manager": "hpc.slurm_k8s", "force_conflicts": True},
        wait=True, wait_timeout=300, **AUTH))


def test_a_re_run_reads_one_list_per_kind_and_writes_nothing():
    result, queries, calls = run_action({"definitions": [SECRET, CONFIG, WORKERS], "auth": AUTH},
                                        [served(SECRET), served(CONFIG), served(WORKERS)])
    assert calls == []
    assert result["changed"] is False and result["applied"] == [] and result["waited_for"] == []
    assert queries == [dict(api_version="v1", kind="Secret", namespace="slurm", **AUTH),
                       dict(api_version="v1", kind="ConfigMap", namespace="slurm", **AUTH),
                       dict(api_version="apps/v1", kind="StatefulSet", namespace="slurm", **AUTH)]


def test_secrets_go_first_in_a_call_of_their_own_and_unchanged_manifests_are_not_sent():
    changed_secret = dict(SECRET, stringData={"munge.key": "rotated-key-material"})
    result, _queries, calls = run_action({"definitions": [CONFIG, WORKERS, changed_secret], "auth": AUTH},
                                         [served(SECRET), served(CONFIG)])
    assert calls == [apply_call([changed_secret]), apply_call([WORKERS])]
    assert result["changed"] is True
    assert result["applied"] == ["Secret/slurm-munge", "StatefulSet/slurmd"]
    assert "rotated-key-material" not in repr(result)


def test_an_unchanged_workload_that_is_not_ready_is_waited_for():
    result, _queries, calls = run_action({"definitions": [WORKERS], "auth": AUTH}, [served(WORKERS, ready=False)],
                                         module_results=[{"changed": False}])
    assert calls == [("kubernetes.core.k8s_info", dict(api_version="apps/v1", kind="StatefulSet", name="slurmd",
                                                       namespace="slurm", wait=True, wait_timeout=300, **AUTH))]
    assert result["changed"] is False and result["waited_for"] == ["StatefulSet/slurmd"]


def test_check_mode_reports_what_a_new_namespace_would_hold_without_sending_it():
    result, queries, calls = run_action({"definitions": [SECRET, CONFIG]}, [], check_mode=True)
    assert calls == []
    assert queries[-1] == {"kind": "Namespace", "resource_name": "slurm"}
    assert result["changed"] is True and result["new_namespaces"] == ["slurm"]
    assert result["msg"] == "would create Secret/slurm-munge, ConfigMap/slurm-config in the new namespace slurm"


def test_check_mode_names_only_what_the_new_namespace_would_hold():
    """An object outside that namespace (here the Namespace itself, cluster-scoped) goes to the server's
    dry run, is reported as applied, and is not named as part of the new namespace."""
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "slurm"}}
    result, _queries, calls = run_action({"definitions": [namespace, CONFIG], "auth": AUTH}, [], check_mode=True,
                                         module_results=[{"changed": True}])
    assert calls == [apply_call([namespace])]
    assert result["applied"] == ["ConfigMap/slurm-config", "Namespace/slurm"]
    assert result["msg"] == "would create ConfigMap/slurm-config in the new namespace slurm"


def test_a_failure_names_the_step_and_never_quotes_a_secret():
    with pytest.raises(AnsibleActionFail, match=r"^applying ConfigMap/slurm-config: connection refused$"):
        run_action({"definitions": [CONFIG]}, [], module_results=[{"failed": True, "msg": "connection refused"}])
    leaked = {"failed": True, "msg": "invalid value %s" % base64.b64encode(b"s3cr3t-key-material").decode()}
    with pytest.raises(AnsibleActionFail) as error:
        run_action({"definitions": [SECRET]}, [], module_results=[leaked])
    assert str(error.value) == "applying Secret/slurm-munge: details left out (they quote a value of the Secret)"


def test_a_read_that_fails_stops_before_any_write():
    class Down(FakeApi):
        def run(self, terms, variables=None, **query):
            raise RuntimeError("Max retries exceeded")

    task = mock.MagicMock(args={"definitions": [CONFIG]}, check_mode=False, async_val=0)
    action = k8s_apply.ActionModule(task, mock.MagicMock(), mock.MagicMock(), None, None, None)
    action._execute_module = mock.Mock()
    with mock.patch.object(k8s_apply.lookup_loader, "get", return_value=Down([])):
        with pytest.raises(AnsibleActionFail, match="^reading the live ConfigMap objects: Max retries exceeded$"):
            action.run(task_vars={})
    action._execute_module.assert_not_called()


def test_absent_deletes_secrets_then_the_rest_in_order_and_reports_what_existed():
    delete = dict(state="absent", delete_options={"propagationPolicy": "Foreground"}, wait=True, wait_timeout=300)
    result, queries, calls = run_action(
        {"definitions": [WORKERS, SECRET, CONFIG], "state": "absent"}, [served(WORKERS), served(SECRET), served(CONFIG)],
        module_results=[{"changed": True}, {"changed": False, "result": {"results": [{"changed": True},
                                                                                     {"changed": False}]}}])
    # one list per kind first: only what exists is deleted
    assert queries == [dict(api_version="apps/v1", kind="StatefulSet", namespace="slurm"),
                       dict(api_version="v1", kind="Secret", namespace="slurm"),
                       dict(api_version="v1", kind="ConfigMap", namespace="slurm")]
    assert calls == [("kubernetes.core.k8s", dict(delete, definition=[SECRET])),
                     ("kubernetes.core.k8s", dict(delete, definition=[WORKERS, CONFIG]))]
    assert result["deleted"] == ["Secret/slurm-munge", "StatefulSet/slurmd"] and result["changed"] is True


def test_absent_deletes_only_what_exists_and_a_rerun_starts_no_module():
    delete = dict(state="absent", delete_options={"propagationPolicy": "Foreground"}, wait=True, wait_timeout=300)
    result, _queries, calls = run_action({"definitions": [WORKERS, SECRET, CONFIG], "state": "absent"},
                                         [served(CONFIG)])
    assert calls == [("kubernetes.core.k8s", dict(delete, definition=[CONFIG]))]
    assert result["deleted"] == ["ConfigMap/slurm-config"]
    result, queries, calls = run_action({"definitions": [WORKERS, SECRET, CONFIG], "state": "absent"}, [])
    assert len(queries) == 3 and calls == []
    assert result["deleted"] == [] and result["changed"] is False


def test_network_policies_off_deletes_the_given_policies_without_waiting_after_the_rest():
    policy = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "p", "namespace": "slurm"}}
    result, queries, calls = run_action({"definitions": [policy, CONFIG], "network_policies": False},
                                        [served(CONFIG), served(policy)])
    assert [query["kind"] for query in queries] == ["ConfigMap", "NetworkPolicy"]
    assert calls == [("kubernetes.core.k8s", dict(state="absent", definition=[policy], wait=False, wait_timeout=300,
                                                  delete_options={"propagationPolicy": "Foreground"}))]
    assert result["deleted"] == ["NetworkPolicy/p"] and result["applied"] == []


def test_network_policies_off_with_state_absent_deletes_them_in_order_with_the_rest():
    policy = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "p", "namespace": "slurm"}}
    _result, _queries, calls = run_action({"definitions": [policy, CONFIG], "state": "absent",
                                           "network_policies": False}, [served(policy), served(CONFIG)])
    assert calls == [("kubernetes.core.k8s", dict(state="absent", definition=[policy, CONFIG], wait=True, wait_timeout=300,
                                                  delete_options={"propagationPolicy": "Foreground"}))]


def test_namespace_places_namespaced_manifests_and_applies_cluster_scoped_ones_first():
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "hpc"}}
    unplaced = {key: value for key, value in CONFIG.items() if key != "metadata"}
    unplaced["metadata"] = {"name": "slurm-config"}
    placed = dict(CONFIG, metadata={"name": "slurm-config", "namespace": "hpc"})
    _result, queries, calls = run_action({"definitions": [unplaced, namespace], "namespace": "hpc", "auth": AUTH}, [])
    assert queries == [dict(api_version="v1", kind="Namespace", resource_name="hpc", **AUTH),
                       dict(api_version="v1", kind="ConfigMap", namespace="hpc", **AUTH)]
    assert calls == [apply_call([namespace, placed])]


def test_incomplete_manifests_are_named_before_anything_is_read_or_sent():
    nameless = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}
    with pytest.raises(AnsibleActionFail, match=r"^k8s_apply: every item of definitions needs apiVersion, kind and "
                                                r"metadata.name: manifest 1 \(ConfigMap/\?\) has no metadata.name$"):
        run_action({"definitions": [CONFIG, nameless], "namespace": "slurm"}, [])


def test_an_unknown_auth_option_is_refused():
    with pytest.raises(AnsibleActionFail, match="unknown auth option.s. token; known: kubeconfig"):
        run_action({"definitions": [CONFIG], "auth": {"token": "x"}}, [])


MONITOR = {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
           "metadata": {"name": "slurmctld-metrics", "namespace": "slurm"}}
METRICS = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "slurmctld-metrics", "namespace": "slurm"}}


def test_absent_leaves_out_a_custom_kind_the_cluster_does_not_serve():
    result, queries, calls = run_action({"definitions": [METRICS, MONITOR], "state": "absent", "auth": AUTH},
                                        [served(METRICS)], unserved={"ServiceMonitor"})
    # one list per kind; the custom kind's "no such kind" means no such object
    assert queries == [{"api_version": "v1", "kind": "Service", "namespace": "slurm", **AUTH},
                       {"api_version": "monitoring.coreos.com/v1", "kind": "ServiceMonitor", "namespace": "slurm", **AUTH}]
    assert calls == [("kubernetes.core.k8s", dict(state="absent", definition=[METRICS],
                                                  delete_options={"propagationPolicy": "Foreground"},
                                                  wait=True, wait_timeout=300, **AUTH))]
    assert result["deleted"] == ["Service/slurmctld-metrics"]


def test_absent_deletes_a_custom_kind_the_cluster_serves():
    _result, _queries, calls = run_action({"definitions": [METRICS, MONITOR], "state": "absent", "auth": AUTH},
                                          [served(METRICS), served(MONITOR)])
    assert [d["kind"] for d in calls[0][1]["definition"]] == ["Service", "ServiceMonitor"]


def test_absent_fails_closed_when_one_of_kubernetes_own_kinds_is_not_found():
    with pytest.raises(AnsibleActionFail, match="^reading the live Service objects: No matches found"):
        run_action({"definitions": [METRICS], "state": "absent"}, [], unserved={"Service"})


def test_absent_stops_when_a_custom_kind_cannot_be_read():
    class Broken(FakeApi):
        def run(self, terms, variables=None, **query):
            raise RuntimeError("Unauthorized")
    task = mock.MagicMock(args={"definitions": [MONITOR], "state": "absent", "auth": AUTH}, check_mode=False,
                          async_val=0, diff=False)
    action = k8s_apply.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None,
                                    shared_loader_obj=None)
    action._execute_module = mock.MagicMock()
    with mock.patch.object(k8s_apply.lookup_loader, "get", return_value=Broken([])):
        with pytest.raises(AnsibleActionFail, match="^reading the live ServiceMonitor objects: Unauthorized$"):
            action.run(task_vars={})
    action._execute_module.assert_not_called()
