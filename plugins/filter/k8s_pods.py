# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over live pods: why they are not ready (k8s_pod_problems), and the patches that annotate
them (k8s_pod_annotations).

Why pods are not ready, in one line each, for the error a failed rollout reports.

kubernetes.core's waiter says only "Timed out waiting on resource". The resources role reads the
cluster's pods when a step fails and adds what this filter finds: a pod the scheduler cannot place
(e.g. "0/1 nodes are available: 1 Insufficient cpu"), a container waiting (ErrImageNeverPull,
CrashLoopBackOff with its message), one that exited, or one running but failing its probes.
"""

from __future__ import annotations

import hashlib

from ansible.errors import AnsibleFilterError


def _container_problem(statuses, init=False):
    for status in statuses:
        state = status.get("state") or {}
        name = status.get("name", "?")
        if "waiting" in state:
            waiting = state["waiting"] or {}
            detail = " ".join(part for part in (waiting.get("reason"), waiting.get("message")) if part)
            return "container %s waiting: %s" % (name, detail or "no reason given")
        if "terminated" in state:
            ended = state["terminated"] or {}
            if init and ended.get("exitCode") == 0:
                continue  # an init container that has done its work
            return "container %s exited %s (%s)" % (name, ended.get("exitCode", "?"), ended.get("reason") or "no reason given")
        if not init and not status.get("ready"):
            return "container %s running, not ready (restarts: %s)" % (name, status.get("restartCount", 0))
    return None


def k8s_pod_problems(pods):
    """'<pod> (<why>)' for every pod that is not Ready, from the status the API server reports."""
    if pods is None:
        return []
    if not isinstance(pods, list):
        raise AnsibleFilterError("k8s_pod_problems expects a list of pods, got %s" % type(pods).__name__)
    problems = []
    for pod in pods:
        if not isinstance(pod, dict):
            continue
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        conditions = {c.get("type"): c for c in status.get("conditions") or [] if isinstance(c, dict)}
        if (conditions.get("Ready") or {}).get("status") == "True":
            continue
        scheduled = conditions.get("PodScheduled") or {}
        if meta.get("deletionTimestamp"):
            why = "being deleted"
        elif scheduled.get("status") == "False":
            why = "not scheduled: %s" % (scheduled.get("message") or scheduled.get("reason") or "no reason given")
        else:
            why = (_container_problem(status.get("initContainerStatuses") or [], init=True)
                   or _container_problem(status.get("containerStatuses") or [])
                   or status.get("reason") or status.get("phase") or "no status yet")
        problems.append("%s (%s)" % (meta.get("name", "?"), why))
    return sorted(problems)


def k8s_not_ready_message(pods, namespace):
    """The sentence a failure message adds about the pods that are not Ready (k8s_pod_problems), with
    the command that shows more; empty when every pod is Ready (or none could be read)."""
    problems = k8s_pod_problems(pods)
    if not problems:
        return ""
    return "Pods of the cluster that are not ready: %s (kubectl -n %s describe pod NAME shows more)." % (
        "; ".join(problems), namespace)


def k8s_pod_annotations(pods, annotations, namespace=None):
    """Partial Pod manifests (apiVersion, kind, name, annotations) that set `annotations` on each of `pods`
    (live pods, whose pending or running ones count, or k8s_pods_mounting's {name}): applied, they change
    the pods' metadata only, which makes the kubelet sync each pod (e.g. refresh its ConfigMap volumes)
    without a restart."""
    if not isinstance(pods, list) or not isinstance(annotations, dict):
        raise AnsibleFilterError("k8s_pod_annotations expects a list of pods and a dict of annotations")
    patches = []
    for pod in pods:
        if not isinstance(pod, dict):
            continue
        if "metadata" in pod:
            if not _live(pod):
                continue
            name, namespace_of_pod = pod["metadata"].get("name"), pod["metadata"].get("namespace")
        else:
            name, namespace_of_pod = pod.get("name"), None
        meta = {"name": name, "annotations": dict((str(k), str(v)) for k, v in annotations.items())}
        if namespace_of_pod or namespace:
            meta["namespace"] = namespace_of_pod or namespace
        patches.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta})
    return patches


def _live(pod):
    return not ((pod or {}).get("metadata") or {}).get("deletionTimestamp") \
        and ((pod or {}).get("status") or {}).get("phase") in ("Pending", "Running")


def k8s_pods_mounting(pods, kind, name):
    """{name, container} of each running pod with a volume of the ConfigMap or Secret `name` (the volume's
    own, or one of the sources of a projected volume) that a ready container mounts, with that container
    (what k8s_pod_annotations takes; the container is where the files are read). (A pod that is not running
    yet reads the files as they are when it starts.)"""
    if not isinstance(pods, list) or kind not in ("ConfigMap", "Secret"):
        raise AnsibleFilterError("k8s_pods_mounting expects a list of pods, ConfigMap or Secret, and a name")
    source, field = ("configMap", "name") if kind == "ConfigMap" else ("secret", "secretName")

    def holds(volume):
        projected = [(item.get(source) or {}).get("name") for item in (volume.get("projected") or {}).get("sources") or []]
        return (volume.get(source) or {}).get(field) == name or name in projected

    found = []
    for pod in pods:
        if not isinstance(pod, dict) or not _live(pod) or (pod.get("status") or {}).get("phase") != "Running":
            continue
        spec = pod.get("spec") or {}
        volumes = {volume.get("name") for volume in spec.get("volumes") or [] if holds(volume)}
        mounting = [c.get("name") for c in spec.get("containers") or []
                    if any(m.get("name") in volumes for m in c.get("volumeMounts") or [])]
        ready = {c.get("name") for c in (pod.get("status") or {}).get("containerStatuses") or [] if c.get("ready")}
        if mounting and mounting[0] in ready:
            found.append({"name": (pod.get("metadata") or {}).get("name"), "container": mounting[0]})
    return found


def k8s_file_sums(files):
    """The lines `sha256sum -- *` prints in a directory that holds exactly `files` (name: content), as a
    ConfigMap volume does: names in the C locale's order, the way the shell sorts them there."""
    if not isinstance(files, dict):
        raise AnsibleFilterError("k8s_file_sums expects a dict of file names and contents")
    return ["%s  %s" % (hashlib.sha256(str(content).encode()).hexdigest(), name)
            for name, content in sorted(files.items(), key=lambda item: str(item[0]).encode())]


class FilterModule(object):
    def filters(self):
        return {"k8s_pod_problems": k8s_pod_problems, "k8s_not_ready_message": k8s_not_ready_message,
                "k8s_pod_annotations": k8s_pod_annotations,
                "k8s_pods_mounting": k8s_pods_mounting, "k8s_file_sums": k8s_file_sums}
