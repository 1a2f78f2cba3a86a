# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over manifests for both backends: placing them in the cluster namespace, checkov's skip
annotations, the TCP probes of a container, and the file of a resource in the render directory (the naming rule lives in plugins/plugin_utils/_manifests.py)."""

from __future__ import annotations

import os

from ansible.errors import AnsibleFilterError

from ansible_collections.hpc.slurm_k8s.plugins.plugin_utils import _manifests


def k8s_namespaced(definitions, namespace):
    """`definitions` with metadata.namespace = `namespace` for every namespaced kind, cluster-scoped
    ones first (k8s_manifest_problems names incomplete ones)."""
    return _manifests.in_namespace(definitions, namespace)


def k8s_manifest_problems(definitions):
    """One message per manifest that lacks apiVersion, kind or metadata.name; empty when all are complete."""
    return _manifests.problems(definitions)


def k8s_manifest_path(render_dir, kind, name, namespace=None):
    """The file of resource `kind`/`name` (a glob such as '*' for every one of a kind) in the render
    directory: <render_dir>/<namespace>/<kind>-<name>.yaml, cluster-scoped kinds under _cluster/."""
    try:
        return os.path.join(str(render_dir), _manifests.relative_path(kind, name, namespace))
    except _manifests.ManifestError as error:
        raise AnsibleFilterError("k8s_manifest_path: %s" % error) from None


def k8s_batches(definitions, owner, state="present", network_policies=True):
    """One include's manifests as batches of the directory backend (k8s_render `batches`), Secrets apart
    (their tasks are no_log): {'secrets': [batch], 'plain': [batch, policies batch]}. NetworkPolicies
    follow cluster_network_policies for every role: with it false (and state present) they go in a batch
    of their own with state absent, so that what an earlier run created is removed."""
    if not isinstance(definitions, list):
        raise AnsibleFilterError("k8s_batches: expected a list of manifests, got %s" % type(definitions).__name__)
    kept, removed = _manifests.split_policies(definitions, state, network_policies)
    secret = [d for d in kept if isinstance(d, dict) and d.get("kind") == "Secret"]
    return {"secrets": [{"owner": owner, "state": state, "definitions": secret}],
            "plain": [{"owner": owner, "state": state, "definitions": [d for d in kept if not any(d is x for x in secret)]},
                      {"owner": owner, "state": "absent", "definitions": removed}]}


def k8s_checkov_annotations(skips):
    """checkov's skip annotations of a workload: ['CKV_K8S_15=reason', ...] -> {'checkov.io/skip1':
    'CKV_K8S_15=reason', ...}, numbered from 1 in the order given (the checks ruled out by design, with
    the reason; cluster_model.checkov_slurm and checkov_pull_policy hold the shared ones)."""
    if not isinstance(skips, list) or not all(isinstance(skip, str) and "=" in skip for skip in skips):
        raise AnsibleFilterError("k8s_checkov_annotations: expected a list of 'CHECK_ID=reason' strings, got %r" % (skips,))
    return {"checkov.io/skip%d" % number: skip for number, skip in enumerate(skips, 1)}


# the timing of every TCP probe (readiness: a few seconds to notice; liveness: two minutes of silence)
TCP_READINESS = {"periodSeconds": 5, "timeoutSeconds": 3}
TCP_LIVENESS = {"periodSeconds": 20, "timeoutSeconds": 5, "failureThreshold": 6}
STARTUP_PERIOD = 5


def _timing(defaults, overrides, what):
    if not isinstance(overrides, dict):
        raise AnsibleFilterError("k8s_tcp_probes: %s must be a dict of probe fields, got %r" % (what, overrides))
    return {key: value for key, value in dict(defaults, **overrides).items() if value is not None}


def k8s_tcp_probes(port, startup_seconds=None, readiness=None, liveness=None):
    """The TCP probes of a container that serves `port` (slurmctld, slurmdbd, login, slurmrestd, slurmd, the
    NFS server), for a template to write into the container: {startupProbe, readinessProbe, livenessProbe}.
    startup_seconds: a startupProbe that allows this long before liveness starts (a daemon that listens
    only once the one it needs answers); readiness, liveness: overrides of the timing (a value of None
    removes that field); readiness=False: no readinessProbe (the container has its own)."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise AnsibleFilterError("k8s_tcp_probes: expected a port number, got %r" % (port,))
    tcp = {"tcpSocket": {"port": port}}
    probes = {"livenessProbe": dict(tcp, **_timing(TCP_LIVENESS, liveness or {}, "liveness"))}
    if readiness is not False:
        probes["readinessProbe"] = dict(tcp, **_timing(TCP_READINESS, readiness or {}, "readiness"))
    if startup_seconds is not None:
        probes["startupProbe"] = dict(tcp, periodSeconds=STARTUP_PERIOD,
                                      failureThreshold=-(-int(startup_seconds) // STARTUP_PERIOD))
    return probes


class FilterModule(object):
    def filters(self):
        return {"k8s_namespaced": k8s_namespaced, "k8s_manifest_problems": k8s_manifest_problems,
                "k8s_manifest_path": k8s_manifest_path, "k8s_checkov_annotations": k8s_checkov_annotations, "k8s_batches": k8s_batches,
                "k8s_tcp_probes": k8s_tcp_probes}
