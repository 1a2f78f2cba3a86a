#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: slurm_job_info
short_description: Read the Slurm job queue, and wait until no job could be lost by a restart
version_added: 0.1.0
description:
  - Lists jobs from C(squeue) with their id, state, user, partition, nodes and reason, filtered and
    counted per state.
  - Reports the jobs in O(active_states), by default every state in which restarting Slurm's daemons
    or removing a worker could lose a job. With O(wait=true), waits until there is none.
  - B(Fails closed). If the queue cannot be read (controller down, authentication failure, invalid
    filter), the task fails. It never reports an empty queue because a command failed.
author:
  - hpc.slurm_k8s maintainers (@hpc-slurm-k8s)
extends_documentation_fragment:
  - hpc.slurm_k8s.slurm
attributes:
  check_mode:
    support: full
    description: Only reads (and waits, if asked); behaves the same in check mode.
  diff_mode:
    support: none
    description: Only reads; nothing to diff.
options:
  states:
    description: Keep only jobs in these states in RV(jobs) and RV(counts). Default is every state.
    type: list
    elements: str
    choices: &states [boot_fail, cancelled, completed, completing, configuring, deadline, failed,
      launch_failed, node_fail, out_of_memory, pending, power_up_node, preempted, reconfig_fail,
      requeue_fed, requeue_hold, requeued, resizing, resv_del_hold, revoked, running, signaling,
      special_exit, stage_out, stopped, suspended, timeout, update_db]
  partitions:
    description: Keep only jobs in these partitions.
    type: list
    elements: str
  users:
    description: Keep only jobs of these users. An unknown user fails the task.
    type: list
    elements: str
  nodes:
    description: Keep only jobs on these nodes (names or hostlist expressions).
    type: list
    elements: str
  job_ids:
    description: Keep only these jobs.
    type: list
    elements: str
  active_states:
    description:
      - The states that count as active for RV(active_jobs) and for O(wait).
      - The default lists the states in which a job holds nodes or is being set up or torn down on
        them, so that a restart of slurmctld/slurmd or the removal of a pod could lose it. Pending
        jobs are not active, they stay queued across a restart.
    type: list
    elements: str
    choices: *states
    default: [running, completing, configuring, suspended, signaling, stage_out, resizing, stopped]
  wait:
    description:
      - Wait until no job matching the filters is in O(active_states). The queue is re-read every
        O(wait_interval) seconds; a failure to read it fails the task at once.
    type: bool
    default: false
  wait_timeout:
    description: Seconds to wait; on timeout the task fails and its message names the jobs still active.
    type: int
    default: 600
  wait_interval:
    description: Seconds between two reads of the queue while waiting.
    type: float
    default: 2.0
seealso:
  - module: hpc.slurm_k8s.slurm_node
  - name: squeue
    description: Slurm's squeue manual (job state codes).
    link: https://slurm.schedmd.com/squeue.html
"""

EXAMPLES = r"""
- name: Refuse to go on while any job could be lost by a restart
  hpc.slurm_k8s.slurm_job_info:
  register: queue

- name: Stop here if jobs are active
  ansible.builtin.assert:
    that: queue.active_count == 0
    fail_msg: "{{ queue.active_count }} job(s) active: {{ queue.active_jobs | map(attribute='job_id') | join(', ') }}"

- name: Wait up to an hour for running jobs on the nodes being removed
  hpc.slurm_k8s.slurm_job_info:
    nodes: ["slurmd-[4-7]"]
    wait: true
    wait_timeout: 3600

- name: Pending jobs of one user in one partition
  hpc.slurm_k8s.slurm_job_info:
    users: [alice]
    partitions: [gpu]
    states: [pending]
"""

RETURN = r"""
jobs:
  description: Jobs matching the filters (and O(states)).
  returned: always
  type: list
  elements: dict
  contains:
    job_id:
      description: Job id as squeue prints it (C(123), array elements C(123_4)).
      type: str
      sample: "123"
    state:
      description: Job state, lower-case.
      type: str
      sample: running
    user:
      description: Owner.
      type: str
      sample: alice
    partition:
      description: Partition.
      type: str
      sample: compute
    nodes:
      description: Allocated nodes as a hostlist, null while pending.
      type: str
      sample: "slurmd-[0-1]"
    node_names:
      description: The allocated nodes, expanded.
      type: list
      elements: str
      sample: [slurmd-0, slurmd-1]
    reason:
      description: Why the job waits (or C(None)).
      type: str
      sample: Resources
    name:
      description: Job name.
      type: str
      sample: wrap
    submit_time:
      description: Submit time.
      type: str
      sample: "2026-11-29T23:10:13"
    start_time:
      description: Start time (or expected start).
      type: str
      sample: "2026-11-29T23:10:14"
    time_used:
      description: Run time so far.
      type: str
      sample: "1:02"
    time_limit:
      description: Time limit of the job as Slurm prints it (V(UNLIMITED) when it has none).
      type: str
      sample: "1:00:00"
    time_left:
      description: Time left until the job reaches its time limit (V(UNLIMITED) when it has none).
      type: str
      sample: "58:58"
    end_time:
      description:
        - Time at which the job ended or, while it runs, reaches its time limit (Slurm's estimate). Slurm puts
          the end of a running job without a time limit one year after its start.
      type: str
      sample: "2026-11-30T00:10:14"
counts:
  description: Number of jobs per state among RV(jobs).
  returned: always
  type: dict
  sample: {running: 2, pending: 5}
active_jobs:
  description: Jobs matching the filters whose state is in O(active_states) (O(states) does not apply).
  returned: always
  type: list
  elements: dict
  sample: [{job_id: "42", state: running, user: alice, partition: compute, nodes: slurmd-0}]
active_count:
  description: Number of RV(active_jobs).
  returned: always
  type: int
  sample: 0
waited:
  description: Seconds spent waiting.
  returned: when O(wait=true)
  type: float
  sample: 31.5
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hpc.slurm_k8s.plugins.module_utils._slurm_jobs import (
    JOB_STATES,
    LOST_ON_RESTART,
    count_states,
    list_jobs,
    wait_until_inactive,
)
from ansible_collections.hpc.slurm_k8s.plugins.module_utils._slurm_runner import (
    SLURM_COMMON_ARGUMENT_SPEC,
    SlurmError,
    SlurmRunner,
)


def run(runner, params):
    nodes = ",".join(params["nodes"]) if params["nodes"] else None

    def read():
        return list_jobs(runner, partitions=params["partitions"], users=params["users"],
                         nodes=nodes, job_ids=params["job_ids"])

    active_states = set(params["active_states"])
    if params["wait"]:
        jobs, waited = wait_until_inactive(read, active_states, params["wait_timeout"], params["wait_interval"])
    else:
        jobs, waited = read(), None
    selected = [job for job in jobs if not params["states"] or job["state"] in params["states"]]
    active = [job for job in jobs if job["state"] in active_states]
    result = dict(changed=False, jobs=selected, counts=count_states(selected),
                  active_jobs=active, active_count=len(active))
    if waited is not None:
        result["waited"] = round(waited, 1)
    return result


def main():
    argument_spec = dict(
        states=dict(type="list", elements="str", choices=list(JOB_STATES)),
        partitions=dict(type="list", elements="str"),
        users=dict(type="list", elements="str"),
        nodes=dict(type="list", elements="str"),
        job_ids=dict(type="list", elements="str"),
        active_states=dict(type="list", elements="str", choices=list(JOB_STATES), default=list(LOST_ON_RESTART)),
        wait=dict(type="bool", default=False),
        wait_timeout=dict(type="int", default=600),
        wait_interval=dict(type="float", default=2.0),
    )
    argument_spec.update(SLURM_COMMON_ARGUMENT_SPEC)
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    params = module.params
    if params["wait_timeout"] < 0 or params["wait_interval"] <= 0:
        module.fail_json(msg="wait_timeout must be >= 0 and wait_interval > 0")
    if not params["active_states"]:
        module.fail_json(msg="active_states must name at least one job state")
    runner = SlurmRunner(module, params["slurm_conf"])
    try:
        result = run(runner, params)
    except SlurmError as error:
        module.fail_json(msg=str(error), **error.result())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
