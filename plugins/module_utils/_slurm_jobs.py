# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Read Slurm's job queue for hpc.slurm_k8s, failing closed: a queue that cannot be read is an error,
never an empty queue. Private to hpc.slurm_k8s."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.hpc.slurm_k8s.plugins.module_utils._slurm_hostlist import expand
from ansible_collections.hpc.slurm_k8s.plugins.module_utils._slurm_runner import SlurmError, SlurmTimeoutError

# Job states as squeue's %T prints them (lower-cased here), Slurm 22.05 through 26.05.
JOB_STATES = (
    "boot_fail", "cancelled", "completed", "completing", "configuring", "deadline", "failed",
    "launch_failed", "node_fail", "out_of_memory", "pending", "power_up_node", "preempted",
    "reconfig_fail", "requeue_fed", "requeue_hold", "requeued", "resizing", "resv_del_hold",
    "revoked", "running", "signaling", "special_exit", "stage_out", "stopped", "suspended",
    "timeout", "update_db",
)

# States in which restarting Slurm's daemons or removing their pods can lose a job or its
# accounting: the job holds nodes, or is being set up or torn down on them.
LOST_ON_RESTART = (
    "running", "completing", "configuring", "suspended", "signaling", "stage_out", "resizing",
    "stopped",
)

# squeue --format fields; the job name is last because it is the only free-text field
# (it may contain the separator).
_FIELDS = (
    ("job_id", "%i"), ("state", "%T"), ("user", "%u"), ("partition", "%P"), ("nodes", "%N"),
    ("reason", "%r"), ("submit_time", "%V"), ("start_time", "%S"), ("time_used", "%M"),
    ("time_limit", "%l"), ("time_left", "%L"), ("end_time", "%e"), ("name", "%j"),
)


def parse_squeue(output):
    jobs = []
    keys = [key for key, _fmt in _FIELDS]
    for line in output.splitlines():
        if not line.strip():
            continue
        values = line.split("|", len(keys) - 1)
        if len(values) != len(keys):
            raise SlurmError("unexpected squeue output line (fields do not match the format asked for): %r" % line)
        job = dict(zip(keys, values))
        job["state"] = job["state"].lower()
        job["nodes"] = job["nodes"] or None
        jobs.append(job)
    return jobs


def list_jobs(runner, partitions=None, users=None, nodes=None, job_ids=None, states=None):
    """Jobs matching the filters, each with `node_names` expanded (one scontrol call for all)."""
    output = runner.squeue([fmt for _key, fmt in _FIELDS], partitions=partitions, users=users,
                           nodes=nodes, job_ids=job_ids)
    jobs = parse_squeue(output)
    if states:
        jobs = [job for job in jobs if job["state"] in states]
    with_nodes = [job for job in jobs if job["nodes"]]
    if with_nodes:
        for job, names in zip(with_nodes, expand(runner, [job["nodes"] for job in with_nodes])):
            job["node_names"] = names
    for job in jobs:
        job.setdefault("node_names", [])
    return jobs


def count_states(jobs):
    counts = {}
    for job in jobs:
        counts[job["state"]] = counts.get(job["state"], 0) + 1
    return counts


def describe(jobs, limit=20):
    """`12 (running, alice, on n[1-2]), ...`: for messages that must name the jobs."""
    parts = ["%s (%s, %s%s)" % (job["job_id"], job["state"], job["user"],
                                ", on %s" % job["nodes"] if job["nodes"] else "") for job in jobs[:limit]]
    if len(jobs) > limit:
        parts.append("and %d more" % (len(jobs) - limit))
    return ", ".join(parts)


def wait_until_inactive(read, active_states, timeout, interval):
    """Poll read() until no job is in `active_states`; return (jobs, seconds waited).

    read() returns the current job list and raises on any failure to read the queue, so a wait
    never ends early because Slurm could not be asked.
    """
    started = time.monotonic()
    while True:
        jobs = read()
        active = [job for job in jobs if job["state"] in active_states]
        if not active:
            return jobs, time.monotonic() - started
        if time.monotonic() - started >= timeout:
            raise SlurmTimeoutError(
                "timed out after %ss: %d job(s) still in %s: %s" % (
                    timeout, len(active), "/".join(sorted(set(j["state"] for j in active))), describe(active)),
                jobs=jobs, active_jobs=active, active_count=len(active))
        time.sleep(interval)
