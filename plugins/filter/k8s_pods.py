# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Why pods are not ready, in one line each, for the error a failed rollout reports.

kubernetes.core's waiter says only "Timed out waiting on resource". The resources role reads the
cluster's pods when a step fails and adds what this filter finds: a pod the scheduler cannot place
(e.g. "0/1 nodes are available: 1 Insufficient cpu"), a container waiting (ErrImageNeverPull,
CrashLoopBackOff with its message), one that exited, or one running but failing its probes.
"""

from __future__ import annotations

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


class FilterModule(object):
    def filters(self):
        return {"k8s_pod_problems": k8s_pod_problems}
