# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan of a Slurm-aware rollout of the slurmd StatefulSet (updateStrategy OnDelete): which pods
are out of date, how many may be unavailable at once, and in which order they are replaced.

The slurmd role replaces the pods itself, batch by batch (drain, wait for the jobs, delete, wait for
the node to register from the new pod, resume its own drain); these filters only decide, from what
the API and Slurm report, so that the decision is unit-tested on its own. Burst (power-save) pods are
not replaced but powered down once idle (k8s_outdated_burst_pods names those made from an old template).
"""

from __future__ import annotations

import json
import math
import re

from ansible.errors import AnsibleFilterError

# what the powersave role's pod templates and slurm-k8s-power put on a burst pod
POD_TEMPLATE_ANNOTATION = "hpc.slurm-k8s/pod-template"
BURST_GROUP_LABEL = "hpc.slurm-k8s/burst-group"
_PERCENT = re.compile(r"^([0-9]{1,3})%$")
_ORDINAL = re.compile(r"-([0-9]+)$")
# base states of a node that holds jobs (slurm_node_info's lower-case base state)
_BUSY = ("allocated", "mixed", "completing")


def slurm_max_unavailable(value, replicas):
    """How many slurmd pods may be unavailable at once: a count (1 or more, at most the replicas) or a
    percentage of the replicas ("25%", rounded down, at least 1)."""
    replicas = int(replicas)
    if isinstance(value, bool):
        raise AnsibleFilterError("slurmd_rollout_max_unavailable must be a count or a percentage, got a boolean")
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, int):
        if not 1 <= value <= max(replicas, 1):
            raise AnsibleFilterError("slurmd_rollout_max_unavailable must be within 1-%d (slurmd_replicas), got %d"
                                     % (max(replicas, 1), value))
        return value
    match = _PERCENT.match(str(value))
    if not match or not 1 <= int(match.group(1)) <= 100:
        raise AnsibleFilterError('slurmd_rollout_max_unavailable must be a count or a percentage within 1%%-100%%'
                                 ' such as "25%%", got %r' % (value,))
    return max(1, int(math.floor(replicas * int(match.group(1)) / 100.0)))


def _ordinal(name):
    match = _ORDINAL.search(name)
    return int(match.group(1)) if match else -1


def k8s_outdated_pods(pods, statefulset):
    """Names of the StatefulSet's pods (ordinal below its replicas) whose revision is not the update
    revision, in ordinal order. Pods being deleted are left out (they are on their way)."""
    if not isinstance(statefulset, dict):
        raise AnsibleFilterError("k8s_outdated_pods expects the StatefulSet as a dict")
    spec, status = statefulset.get("spec") or {}, statefulset.get("status") or {}
    generation = (statefulset.get("metadata") or {}).get("generation")
    if status.get("observedGeneration") != generation:
        raise AnsibleFilterError("the StatefulSet's controller has not observed generation %s yet (status: %s)"
                                 % (generation, status.get("observedGeneration")))
    revision, replicas = status.get("updateRevision"), int(spec.get("replicas") or 0)
    name = (statefulset.get("metadata") or {}).get("name")
    outdated = []
    for pod in pods or []:
        meta = pod.get("metadata") or {}
        pod_name = meta.get("name") or ""
        if meta.get("deletionTimestamp") or not pod_name.startswith("%s-" % name) or _ordinal(pod_name) >= replicas:
            continue
        if (meta.get("labels") or {}).get("controller-revision-hash") != revision:
            outdated.append(pod_name)
    return sorted(outdated, key=_ordinal)


def k8s_outdated_burst_pods(pods, power_files):
    """Names of the live burst pods made from another pod template than their group's current one.

    `power_files` is the data of the powersave role's ConfigMap: each `pod-<group>.json` carries, in the
    annotation hpc.slurm-k8s/pod-template, the digest of that template, which every pod made from it
    inherits. Pods being deleted or already ended are left out (their nodes are powering down, or the
    next power-up replaces them), and so are pods of a group that no longer exists (not Slurm nodes any
    more)."""
    if not isinstance(power_files, dict):
        raise AnsibleFilterError("k8s_outdated_burst_pods expects the data of the power-save ConfigMap as a dict")
    current = {}
    for name, text in power_files.items():
        if name.startswith("pod-") and name.endswith(".json"):
            try:
                template = json.loads(text)
            except ValueError as error:
                raise AnsibleFilterError("%s of the power-save ConfigMap is not JSON: %s" % (name, error))
            current[name[len("pod-"):-len(".json")]] = ((template.get("metadata") or {}).get("annotations") or {}).get(
                POD_TEMPLATE_ANNOTATION)
    outdated = []
    for pod in pods or []:
        meta = pod.get("metadata") or {}
        group = (meta.get("labels") or {}).get(BURST_GROUP_LABEL)
        if meta.get("deletionTimestamp") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        if group in current and (meta.get("annotations") or {}).get(POD_TEMPLATE_ANNOTATION) != current[group]:
            outdated.append(meta.get("name"))
    return sorted(outdated, key=lambda name: (_ORDINAL.sub("", name), _ordinal(name)))


def k8s_ready_pods(pods, revision):
    """Names of the pods that are Ready, not being deleted, and of the StatefulSet revision `revision`:
    a pod replaced by the rollout counts once its successor is."""
    ready = []
    for pod in pods or []:
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        if meta.get("deletionTimestamp") or (meta.get("labels") or {}).get("controller-revision-hash") != revision:
            continue
        if any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []):
            ready.append(meta.get("name"))
    return sorted(ready, key=_ordinal)


def k8s_pod_refs(names):
    """Pod manifests that name the pods `names` (what the resources role deletes)."""
    return [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}} for name in names or []]


def slurm_rollout_batches(outdated, nodes, max_unavailable):
    """The outdated pods in batches of at most `max_unavailable`: first those whose node holds no job
    (or is not registered), then the busy ones by how many CPUs their jobs hold, each group in ordinal
    order. `nodes` is what slurm_node_info returns."""
    size = int(max_unavailable)
    if size < 1:
        raise AnsibleFilterError("the batch size must be at least 1, got %d" % size)
    known = dict((node.get("name"), node) for node in nodes or [])

    def load(name):
        node = known.get(name)
        if node is None:
            return (0, 0, _ordinal(name))
        busy = node.get("state") in _BUSY or "completing" in (node.get("flags") or []) or (node.get("cpus_allocated") or 0) > 0
        return (1 if busy else 0, node.get("cpus_allocated") or 0, _ordinal(name))

    ordered = sorted(outdated or [], key=load)
    return [ordered[i:i + size] for i in range(0, len(ordered), size)]


_DURATION = re.compile(r"^(?:(?:([0-9]+)-)?([0-9]+):)?([0-9]+):([0-9]+)$")


def _slurm_seconds(text):
    """Seconds of a Slurm duration ([days-][hours:]minutes:seconds), None for UNLIMITED and the like."""
    match = _DURATION.match((text or "").strip())
    if not match:
        return None
    days, hours, minutes, seconds = (int(part or 0) for part in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def slurm_maintenance_window(jobs):
    """When a whole-cluster maintenance window can start: the running jobs (slurm_job_info's active_jobs)
    hold their nodes at most until their time limits, so the window starts, at the latest, when the job
    with the most time left reaches its limit. Returns the number of jobs, `seconds` from now (None when a
    job has no time limit), the job that ends last with Slurm's end time (slurmctld's clock), and the jobs
    without a time limit. Jobs usually end earlier: the rollout starts as soon as none is left."""
    jobs = list(jobs or [])
    unlimited = [job["job_id"] for job in jobs if _slurm_seconds(job.get("time_left")) is None]
    last = max(jobs, key=lambda job: _slurm_seconds(job.get("time_left")) or 0) if jobs else None
    return {
        "jobs": len(jobs),
        "seconds": None if unlimited else (_slurm_seconds(last["time_left"]) if last else 0),
        "last_job": last["job_id"] if last and not unlimited else None,
        "ends_at": last.get("end_time") if last and not unlimited else None,
        "unlimited": unlimited,
    }


class FilterModule(object):
    def filters(self):
        return {"slurm_max_unavailable": slurm_max_unavailable, "k8s_outdated_pods": k8s_outdated_pods,
                "slurm_rollout_batches": slurm_rollout_batches,
                "k8s_ready_pods": k8s_ready_pods, "k8s_pod_refs": k8s_pod_refs,
                "k8s_outdated_burst_pods": k8s_outdated_burst_pods,
                "slurm_maintenance_window": slurm_maintenance_window}
