#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: slurm_node_info
short_description: Read Slurm nodes with their state, flags, reason, resources and jobs
version_added: 0.1.0
description:
  - Lists Slurm nodes as C(scontrol show node) sees them, with the jobs that currently hold each node.
  - Fails when Slurm cannot be read; never returns an empty list because a command failed.
author:
  - hpc.slurm_k8s maintainers (@hpc-slurm-k8s)
extends_documentation_fragment:
  - hpc.slurm_k8s.slurm
attributes:
  check_mode:
    support: full
    description: Only reads; behaves the same in check mode.
  diff_mode:
    support: none
    description: Only reads; nothing to diff.
options:
  nodes:
    description:
      - Node names or Slurm hostlist expressions to list, or C(ALL). Unknown names fail the task.
    type: list
    elements: str
    default: [ALL]
  states:
    description:
      - Keep only nodes whose base state or one of whose flags is in this list (for example V(drain),
        V(idle), V(down), V(not_responding), V(dynamic_norm)), or whose drain state is V(drained) or
        V(draining). Case-insensitive.
    type: list
    elements: str
seealso:
  - module: hpc.slurm_k8s.slurm_node
  - module: hpc.slurm_k8s.slurm_job_info
"""

EXAMPLES = r"""
- name: Nodes that are drained or draining
  hpc.slurm_k8s.slurm_node_info:
    states: [drain]
  register: drained

- name: Show who drained them and why
  ansible.builtin.debug:
    msg: "{{ item.name }}: {{ item.reason }} ({{ item.reason_user }} at {{ item.reason_time }})"
  loop: "{{ drained.nodes }}"
"""

RETURN = r"""
nodes:
  description: The selected nodes in Slurm's order.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Node name.
      type: str
      sample: slurmd-0
    state:
      description: Base state, lower-case (idle, mixed, allocated, down, unknown, future, ...).
      type: str
      sample: mixed
    flags:
      description: State flags, lower-case (drain, completing, not_responding, powered_down, dynamic_norm, ...).
      type: list
      elements: str
      sample: [drain]
    state_string:
      description: The state as scontrol prints it.
      type: str
      sample: MIXED+DRAIN
    drain_state:
      description: V(drained) (DRAIN and no job left), V(draining) (DRAIN with jobs) or null.
      type: str
      sample: draining
    reason:
      description: The reason for drain/down, without the user and time.
      type: str
      sample: "hpc.slurm_k8s:upgrade upgrade to 24.11"
    reason_user:
      description: Who set the reason.
      type: str
      sample: root
    reason_time:
      description: When the reason was set (Slurm's time format).
      type: str
      sample: "2026-11-29T23:10:13"
    ours:
      description: Whether the reason carries the hpc.slurm_k8s tag (set by this collection).
      type: bool
      sample: true
    cpus:
      description: CPUs of the node (CPUTot).
      type: int
      sample: 4
    cpus_allocated:
      description: CPUs allocated to jobs.
      type: int
      sample: 2
    real_memory:
      description: Configured memory in MiB.
      type: int
      sample: 7600
    allocated_memory:
      description: Memory allocated to jobs in MiB.
      type: int
      sample: 1000
    partitions:
      description: Partitions the node belongs to.
      type: list
      elements: str
      sample: [compute]
    features:
      description: Available features.
      type: list
      elements: str
      sample: [k8s]
    address:
      description: NodeAddr.
      type: str
      sample: 10.244.1.7
    version:
      description: Slurm version the node's slurmd reported (null before it registered).
      type: str
      sample: "24.11.5"
    jobs:
      description: Ids of the jobs holding the node (running, completing, suspended, ...).
      type: list
      elements: str
      sample: ["42"]
counts:
  description: Number of selected nodes per base state and per flag.
  returned: always
  type: dict
  sample: {idle: 3, mixed: 1, drain: 1}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hpc.slurm_k8s.plugins.module_utils._slurm_jobs import LOST_ON_RESTART, list_jobs
from ansible_collections.hpc.slurm_k8s.plugins.module_utils._slurm_nodes import NodeTable
from ansible_collections.hpc.slurm_k8s.plugins.module_utils._slurm_runner import (
    SLURM_COMMON_ARGUMENT_SPEC,
    SlurmError,
    SlurmRunner,
)


def matches(node, wanted):
    return not wanted or bool(wanted & set([node["state"], node["drain_state"]] + node["flags"]))


def run(runner, nodes, states):
    table = NodeTable(runner)
    names = set(table.select(nodes))
    table.attach_jobs(list_jobs(runner, states=LOST_ON_RESTART))
    wanted = set(state.lower() for state in states or [])
    selected = [table.nodes[n] for n in table.order if n in names and matches(table.nodes[n], wanted)]
    counts = {}
    for node in selected:
        for key in [node["state"]] + node["flags"]:
            counts[key] = counts.get(key, 0) + 1
    return dict(changed=False, nodes=selected, counts=counts)


def main():
    argument_spec = dict(
        nodes=dict(type="list", elements="str", default=["ALL"]),
        states=dict(type="list", elements="str"),
    )
    argument_spec.update(SLURM_COMMON_ARGUMENT_SPEC)
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    runner = SlurmRunner(module, module.params["slurm_conf"])
    try:
        result = run(runner, module.params["nodes"] or ["ALL"], module.params["states"])
    except SlurmError as error:
        module.fail_json(msg=str(error), **error.result())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
