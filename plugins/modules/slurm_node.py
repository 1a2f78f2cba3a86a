#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: slurm_node
short_description: Drain, resume, down or power down Slurm nodes, never touching nodes drained by someone else
version_added: 0.1.0
description:
  - Brings one or many Slurm nodes to a desired state with one C(scontrol update) call per kind of
    change for the whole set, after reading every node's state first.
  - Nodes already in the desired state are left alone and reported as such.
  - Every drain or down reason this module writes starts with the tag C(hpc.slurm_k8s:<tag>), so that
    O(state=resumed) returns to service only the nodes drained for that purpose. A node drained or set
    down by an administrator (any other reason) stays as it is unless O(force=true).
author:
  - hpc.slurm_k8s maintainers (@hpc-slurm-k8s)
extends_documentation_fragment:
  - hpc.slurm_k8s.slurm
attributes:
  check_mode:
    support: full
    description: Reads the nodes and reports what would change; runs no C(scontrol update) and does not wait.
  diff_mode:
    support: full
    description: Shows each target node's state and reason before and after.
options:
  nodes:
    description:
      - Node names or Slurm hostlist expressions (C(slurmd-[0-15]), C(n[1-3,7])), or C(ALL) for every node.
      - Every name must be a node Slurm knows; an unknown name fails the task before anything changes.
    type: list
    elements: str
    required: true
  state:
    description:
      - V(drained) sets the DRAIN flag (running jobs finish, no new job starts); with O(wait=true) the
        task returns once no job is left on the nodes.
      - V(resumed) returns nodes to service. A drained node is undrained and keeps its base state (a node
        that is also down stays down); a node that is down is resumed. Only nodes whose reason carries
        this module's tag and O(tag) are touched, unless O(force=true).
      - V(down) sets the nodes DOWN. Slurm kills or requeues jobs on a node set down, so nodes with jobs
        are refused (named in the error) unless O(force=true).
      - V(powered_down) powers power-saving (C(State=CLOUD)) nodes down once their jobs have ended
        (C(scontrol update state=POWER_DOWN_ASAP)) - Slurm drains them at once, so no new job starts
        there, runs C(SuspendProgram) when they are idle and ends that drain itself; the next job that
        needs them powers them up again. It does not wait. Nodes already powered down or on their way
        are left alone, as are nodes drained by someone else (the power-down would end their drain) and
        nodes that are not power-saving nodes, unless O(force=true). Give it a tag of its own, since a later
        O(state=resumed) with the same tag would end the drain before the node powers down.
    type: str
    choices: [drained, resumed, down, powered_down]
    required: true
  reason:
    description:
      - Why the nodes are drained, down or powered down; required for O(state=drained), O(state=down)
        and O(state=powered_down).
      - Stored by Slurm as C(hpc.slurm_k8s:<tag> <reason>).
    type: str
  tag:
    description:
      - Purpose tag written into the reason (for example V(upgrade), V(scale)), and the tag that
        O(state=resumed) requires before it returns a node to service.
      - Lower-case letters, digits, C(.), C(_) and C(-).
    type: str
    default: maintenance
  force:
    description:
      - With O(state=resumed), also resume nodes drained or downed by someone else or for another tag.
      - With O(state=down), also down nodes that have jobs on them.
      - With O(state=powered_down), also power down nodes drained by someone else, and nodes that are
        not power-saving nodes.
    type: bool
    default: false
  wait:
    description:
      - With O(state=drained), wait until no job is left on the target nodes (their state is C(drained),
        not C(draining)).
    type: bool
    default: false
  wait_timeout:
    description: Seconds to wait with O(wait=true); on timeout the task fails naming the nodes and their jobs.
    type: int
    default: 600
  wait_interval:
    description: Seconds between two polls while waiting.
    type: float
    default: 2.0
seealso:
  - module: hpc.slurm_k8s.slurm_node_info
  - module: hpc.slurm_k8s.slurm_job_info
  - name: scontrol
    description: Slurm's scontrol manual, section on node states.
    link: https://slurm.schedmd.com/scontrol.html
"""

EXAMPLES = r"""
- name: Drain every node before an upgrade and wait for running jobs to finish
  hpc.slurm_k8s.slurm_node:
    nodes: ALL
    state: drained
    tag: upgrade
    reason: "upgrade to Slurm 24.11"
    wait: true
    wait_timeout: 3600

- name: Return to service only the nodes drained for the upgrade (admin-drained nodes stay drained)
  hpc.slurm_k8s.slurm_node:
    nodes: ALL
    state: resumed
    tag: upgrade

- name: Take two broken nodes out of service on a bare-metal cluster
  hpc.slurm_k8s.slurm_node:
    nodes: "cn[017,042]"
    state: down
    reason: "DIMM errors, ticket 4711"
    slurm_conf: /etc/slurm/slurm.conf

- name: Power down the burst nodes made from an old pod template, each once its jobs have ended
  hpc.slurm_k8s.slurm_node:
    nodes: "slurmd-burst-[0-3]"
    state: powered_down
    tag: powerdown
    reason: "pod template changed"
"""

RETURN = r"""
nodes:
  description: Every target node with its state before and after and what was done to it.
  returned: always
  type: dict
  sample:
    slurmd-0:
      action: drain
      before: {state: "MIXED", reason: null}
      after: {state: "MIXED+DRAIN", reason: "hpc.slurm_k8s:upgrade upgrade to 24.11"}
    slurmd-1:
      action: none
      before: {state: "IDLE+DRAIN", reason: "bad disk"}
      after: {state: "IDLE+DRAIN", reason: "bad disk"}
      message: "drained by root (bad disk): not ours to resume (force: true overrides)"
changed_nodes:
  description: Names of the nodes whose state was (or in check mode would be) changed.
  returned: always
  type: list
  elements: str
  sample: [slurmd-0, slurmd-2]
unchanged_nodes:
  description: Names of the nodes already in the desired state.
  returned: always
  type: list
  elements: str
  sample: [slurmd-3]
skipped_nodes:
  description: Nodes not in the desired state that were left alone, with the reason (drained by someone else, jobs on a node to set down).
  returned: always
  type: dict
  sample: {slurmd-1: "drained by root (bad disk): not ours to resume (force: true overrides)"}
reason:
  description: The full reason written for O(state=drained), O(state=down) and O(state=powered_down), tag included.
  returned: when O(state) is V(drained), V(down) or V(powered_down)
  type: str
  sample: "hpc.slurm_k8s:upgrade upgrade to 24.11"
waited:
  description: Seconds spent waiting for the nodes to drain.
  returned: when O(wait=true) and not in check mode
  type: float
  sample: 12.4
msg:
  description: One sentence saying what happened.
  returned: always
  type: str
  sample: "drained 2 node(s): slurmd-[0,2]; 1 already drained"
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hpc.slurm_k8s.plugins.module_utils._slurm_jobs import LOST_ON_RESTART, list_jobs
from ansible_collections.hpc.slurm_k8s.plugins.module_utils._slurm_nodes import (
    TAG_PATTERN,
    NodeTable,
    apply_plan,
    plan,
    predicted,
    tagged_reason,
    view,
    wait_drained,
)
from ansible_collections.hpc.slurm_k8s.plugins.module_utils._slurm_runner import (
    SLURM_COMMON_ARGUMENT_SPEC,
    SlurmCommandError,
    SlurmError,
    SlurmRunner,
    SlurmTimeoutError,
)

_VERBS = dict(drained="drained", resumed="resumed", down="set down", powered_down="powered down")
_ALREADY = dict(resumed="in service", powered_down="powered down or on their way")


def run(module, runner):
    params = module.params
    state = params["state"]
    reason = tagged_reason(params["tag"], params["reason"]) if state in ("drained", "down", "powered_down") else None

    table = NodeTable(runner)
    names = table.select(params["nodes"])
    node_plan = plan(table, names, state, params["tag"], params["force"])
    before = dict((name, view(table.nodes[name])) for name in names)
    action_of = dict((n, action.lower()) for action, ns in node_plan.actions.items() for n in ns)
    changed = bool(node_plan.actions)

    result = dict(changed=changed, changed_nodes=node_plan.changed_names,
                  unchanged_nodes=node_plan.unchanged, skipped_nodes=node_plan.skipped)
    if reason is not None:
        result["reason"] = reason

    done = {}
    if module.check_mode:
        after = dict((n, predicted(table.nodes[n], action_of[n].upper(), reason) if n in action_of else before[n])
                     for n in names)
    else:
        if changed:
            try:
                done = apply_plan(table, node_plan, reason)
            except SlurmCommandError as error:
                # scontrol applies an update node by node: report what did change before failing.
                try:
                    table.refresh()
                    error.details["nodes"] = _per_node(
                        names, before, dict((n, view(table.nodes[n])) for n in names), action_of, node_plan.skipped)
                except SlurmError:
                    error.details["nodes_unknown"] = "the node states could not be read again after the failure"
                raise
        if params["wait"] and state == "drained":
            started = time.monotonic()
            try:
                wait_drained(table, names, params["wait_timeout"], params["wait_interval"],
                             lambda hostlist: list_jobs(runner, nodes=hostlist, states=LOST_ON_RESTART))
            except SlurmTimeoutError as error:
                # The drain itself happened: say so, the nodes stay drained for a later retry.
                error.details.update(result)
                raise
            result["waited"] = round(time.monotonic() - started, 1)
        elif table.stale:
            table.refresh()
        after = dict((n, view(table.nodes[n])) for n in names)

    result["nodes"] = _per_node(names, before, after, action_of, node_plan.skipped)
    if module._diff:
        result["diff"] = dict(before=before, after=after)
    result["msg"] = _message(state, node_plan, done, module.check_mode)
    return result


def _per_node(names, before, after, action_of, skipped):
    nodes = {}
    for name in names:
        entry = dict(action=action_of.get(name, "none"), before=before[name], after=after[name])
        if name in skipped:
            entry["message"] = skipped[name]
        nodes[name] = entry
    return nodes


def _message(state, node_plan, done, check_mode):
    parts = []
    changed = node_plan.changed_names
    if changed:
        listing = " ".join(done.values()) if done else ",".join(changed[:10]) + (",..." if len(changed) > 10 else "")
        if state == "powered_down":
            parts.append("%s %d node(s) once their jobs end: %s" % (
                "would power down" if check_mode else "powering down", len(changed), listing))
        else:
            parts.append("%s%s %d node(s): %s" % ("would have " if check_mode else "", _VERBS[state], len(changed), listing))
    if node_plan.unchanged:
        parts.append("%d already %s" % (len(node_plan.unchanged), _ALREADY.get(state, _VERBS[state])))
    if node_plan.skipped:
        parts.append("%d left alone (see skipped_nodes)" % len(node_plan.skipped))
    return "; ".join(parts) or "no node selected"


def main():
    argument_spec = dict(
        nodes=dict(type="list", elements="str", required=True),
        state=dict(type="str", required=True, choices=["drained", "resumed", "down", "powered_down"]),
        reason=dict(type="str"),
        tag=dict(type="str", default="maintenance"),
        force=dict(type="bool", default=False),
        wait=dict(type="bool", default=False),
        wait_timeout=dict(type="int", default=600),
        wait_interval=dict(type="float", default=2.0),
    )
    argument_spec.update(SLURM_COMMON_ARGUMENT_SPEC)
    module = AnsibleModule(
        argument_spec=argument_spec,
        required_if=[("state", "drained", ("reason",)), ("state", "down", ("reason",)), ("state", "powered_down", ("reason",))],
        supports_check_mode=True,
    )
    params = module.params
    if not TAG_PATTERN.match(params["tag"]):
        module.fail_json(msg="tag %r is not valid: expected lower-case letters, digits, '.', '_' or '-' "
                             "(it becomes part of the Slurm reason hpc.slurm_k8s:<tag>)" % params["tag"])
    if params["reason"] is not None and not params["reason"].strip():
        module.fail_json(msg="reason must not be empty: Slurm refuses to drain or down a node without one")
    if not params["nodes"]:
        module.fail_json(msg="nodes must list at least one node name, hostlist expression or ALL")
    if params["wait_timeout"] < 0 or params["wait_interval"] <= 0:
        module.fail_json(msg="wait_timeout must be >= 0 and wait_interval > 0")

    runner = SlurmRunner(module, params["slurm_conf"])
    try:
        result = run(module, runner)
    except SlurmError as error:
        module.fail_json(msg=str(error), **error.result())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
