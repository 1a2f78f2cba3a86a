#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: slurm_accounting
short_description: Declarative Slurm accounting - QoS, accounts, users and their associations
version_added: 0.2.0
description:
  - Brings Slurm's accounting database (slurmdbd) to the listed QoS, accounts and users in one task,
    through C(sacctmgr).
  - Reads the current state once (C(sacctmgr --parsable2 --noheader show ...)), validates the whole
    input against it, plans, and only then changes anything. Every new account, user and association is
    added by one C(sacctmgr -i load) of a computed flat file (the format of C(sacctmgr dump)); QoS,
    modifications and removals are C(sacctmgr -i) calls, entities that take the same change sharing one.
    After the changes it reads the state again and fails if slurmdbd does not report what was asked, so a
    second run reports no change.
  - One module rather than one per entity, because the entities depend on each other (an association
    names an account and QoS, an account its parent); planning them together orders the calls so that
    Slurm accepts them, and validates references before anything changes.
  - Settings not given are left as they are. Entities not listed are left alone unless O(purge=true).
  - Removing an account, user, association or QoS that active jobs (pending, running, suspended, ...)
    still use is refused, naming the jobs, unless O(force=true). slurmdbd 22.05 does not refuse it
    itself - the association disappears under the running job.
  - Slurm lower-cases account, user and QoS names; they are compared without case, and so are
    descriptions and organizations (Slurm 22.05 and 24.11 lower-case those too).
author:
  - hpc.slurm_k8s maintainers (@hpc-slurm-k8s)
extends_documentation_fragment:
  - hpc.slurm_k8s.slurm
attributes:
  check_mode:
    support: full
    description: Reads the state and the queue, reports the plan and the exact commands; changes nothing.
  diff_mode:
    support: full
    description: Shows each changed entity's settings before and after.
options:
  cluster:
    description:
      - The cluster whose associations are managed (its C(ClusterName)).
      - Omit it when slurmdbd knows one cluster; with several, it is required.
    type: str
  qos:
    description: Quality of service entries. A limit set to V(-1) (or V(""), for a TRES list) is removed.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: QoS name.
        type: str
        required: true
      state:
        description: Whether the QoS exists.
        type: str
        choices: [present, absent]
        default: present
      description:
        description: Free text.
        type: str
      priority:
        description: Priority factor of jobs in this QoS.
        type: int
      preempt:
        description: QoS whose jobs this QoS may preempt.
        type: list
        elements: str
      preempt_mode:
        description: How preempted jobs are treated (V(cluster), V(off), V(cancel), V(gang), V(requeue), V(suspend)).
        type: str
      grp_tres:
        description:
          - Limit on the TRES all jobs in the QoS hold at once, as C(cpu=64,mem=256G,gres/gpu=8) or a dict.
          - Memory takes K, M (default), G, T or P. The list given is the whole limit (other TRES are unset).
        type: raw
      max_tres_per_user:
        description: Limit on the TRES that the jobs of one user hold at once (same form as O(qos[].grp_tres)).
        type: raw
      max_tres_per_job:
        description: Limit on the TRES of one job (same form as O(qos[].grp_tres)).
        type: raw
      max_jobs_per_user:
        description: Running jobs per user (more stay PENDING with reason C(QOSMaxJobsPerUserLimit)).
        type: int
      max_submit_jobs_per_user:
        description: Running plus pending jobs per user (more are refused at submit).
        type: int
      max_wall:
        description:
          - Longest time limit of a job, in minutes or as a Slurm time (C(30:00), C(1-00:00:00)).
          - With C(DenyOnLimit) in O(qos[].flags), longer jobs are refused at submit.
        type: raw
      flags:
        description: QoS flags (for example V(DenyOnLimit), V(NoDecay)); the list given replaces the current flags.
        type: list
        elements: str
  accounts:
    description: Accounts and their association in O(cluster).
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: Account name.
        type: str
        required: true
      state:
        description: Whether the account exists in the cluster.
        type: str
        choices: [present, absent]
        default: present
      parent:
        description: 'Parent account (default for a new account: V(root)).'
        type: str
      description:
        description: Free text.
        type: str
      organization:
        description: Free text.
        type: str
      fairshare:
        description: Fair-share shares (a positive number) or V(parent).
        type: str
      qos:
        description: QoS the users of the account may use.
        type: list
        elements: str
      default_qos:
        description: QoS of jobs that ask for none; must be in O(accounts[].qos).
        type: str
  users:
    description: Users and their associations in O(cluster).
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: User name (the Unix login).
        type: str
        required: true
      state:
        description: Whether the user exists in the cluster.
        type: str
        choices: [present, absent]
        default: present
      default_account:
        description: Account of jobs that name none; required for a present user (an association with it is made).
        type: str
      admin_level:
        description: Slurm administration level (V(none), V(operator), V(administrator)).
        type: str
      associations:
        description: Further associations of the user (the one with O(users[].default_account) always exists).
        type: list
        elements: dict
        default: []
        suboptions:
          account:
            description: Account.
            type: str
            required: true
          partition:
            description: Restrict the association to this partition.
            type: str
          state:
            description: Whether the association exists.
            type: str
            choices: [present, absent]
            default: present
  purge:
    description:
      - Also remove the QoS, accounts, users and user associations of O(cluster) that are not listed.
      - Never removes the account V(root), the user V(root) or the QoS V(normal).
    type: bool
    default: false
  force:
    description: Remove accounts, users, associations or QoS even while active jobs use them.
    type: bool
    default: false
  defer_tres:
    description:
      - TRES that slurm.conf is about to count (its C(AccountingStorageTRES), before the reconfigure that
        loads it). slurmdbd knows a TRES only once slurmctld has registered it, so a QoS limit on one of
        these that slurmdbd does not know yet is left out, listed in RV(deferred), instead of failing;
        run the module again after the reconfigure.
      - Any other unknown TRES fails the task before anything changes.
    type: list
    elements: str
    default: []
requirements:
  - C(sacctmgr) and C(squeue) on the target host, run as root or Slurm's C(SlurmUser) (accounting administrators).
seealso:
  - module: hpc.slurm_k8s.slurm_node
  - name: sacctmgr
    description: Slurm's sacctmgr manual.
    link: https://slurm.schedmd.com/sacctmgr.html
"""

EXAMPLES = r"""
- name: Two projects, a GPU QoS and a short debug QoS
  hpc.slurm_k8s.slurm_accounting:
    qos:
      - {name: gpu, priority: 100, grp_tres: "gres/gpu=8", max_tres_per_user: "gres/gpu=2"}
      - {name: debug, priority: 50, max_wall: "00:30:00", max_jobs_per_user: 1, flags: [DenyOnLimit]}
    accounts:
      - {name: physics, description: Physics department, fairshare: 60, qos: [normal, debug, gpu], default_qos: normal}
      - {name: chemistry, description: Chemistry department, fairshare: 40, qos: [normal, debug], default_qos: normal}
    users:
      - {name: alice, default_account: physics}
      - {name: bob, default_account: chemistry, associations: [{account: physics, partition: gpu}]}

- name: Remove an account (refused while its jobs run)
  hpc.slurm_k8s.slurm_accounting:
    accounts:
      - {name: oldproject, state: absent}
    slurm_conf: /etc/slurm/slurm.conf
"""

RETURN = r"""
cluster:
  description: The cluster whose associations were managed.
  returned: always
  type: str
  sample: linux
changes:
  description: Per kind (qos, accounts, users), each changed entity with its action and settings before and after.
  returned: always
  type: dict
  sample:
    qos: {debug: {action: modify, before: {max_wall: "01:00:00"}, after: {max_wall: "00:30:00"}}}
    accounts: {}
    users: {alice: {action: add, before: null, after: {default_account: physics, associations: [physics]}}}
commands:
  description:
    - The sacctmgr argument lists run (in check mode, the ones that would run), in order.
    - Every new account, user and association is added by one C(sacctmgr -i load file=/dev/stdin) of RV(load_file).
  returned: always
  type: list
  elements: list
  sample: [["sacctmgr", "-i", "modify", "qos", "where", "name=debug", "set", "MaxWall=30"]]
load_file:
  description:
    - The flat file (the format of C(sacctmgr dump)) that the load command of RV(commands) reads on its standard
      input; null when nothing is added.
  returned: always
  type: str
  sample: "Cluster - 'linux'\nParent - 'physics'\nUser - 'alice':DefaultAccount='physics'\n"
deferred:
  description: The QoS limits left for a later run (see O(defer_tres)).
  returned: always
  type: list
  elements: str
  sample: ["qos[gpu].grp_tres"]
blocking_jobs:
  description: Active jobs that use what is to be removed (the removal is refused unless O(force=true)).
  returned: when removals are planned
  type: list
  elements: dict
msg:
  description: One sentence saying what happened.
  returned: always
  type: str
  sample: "added 1 user(s), modified 1 qos in 2 sacctmgr call(s)"
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hpc.slurm_k8s.plugins.module_utils._slurm_accounting import (
    LOAD_COMMAND,
    AccountingState,
    blocking_jobs,
    plan,
    read_jobs,
)
from ansible_collections.hpc.slurm_k8s.plugins.module_utils._slurm_jobs import describe
from ansible_collections.hpc.slurm_k8s.plugins.module_utils._slurm_runner import (
    SLURM_COMMON_ARGUMENT_SPEC,
    SlurmCommandError,
    SlurmError,
    SlurmInputError,
    SlurmRunner,
)

_KINDS = ("qos", "accounts", "users")
_VERBS = (("add", "added"), ("modify", "modified"), ("remove", "removed"))


def run(module, runner):
    params = module.params
    state = AccountingState(runner, params["cluster"])
    entities = dict((kind, params[kind]) for kind in _KINDS)
    the_plan = plan(state, purge=params["purge"], defer_tres=params["defer_tres"], **entities)

    load_file = the_plan.load_file()
    result = dict(cluster=state.cluster, changed=bool(the_plan.commands), deferred=the_plan.deferred,
                  commands=[["sacctmgr"] + command for command in the_plan.commands], load_file=load_file)
    result["changes"] = dict((kind, {}) for kind in _KINDS)
    for change in the_plan.changes:
        result["changes"][change.kind][change.name] = dict(action=change.action, before=change.before, after=change.after)

    if any(the_plan.removals.values()):
        blocked = blocking_jobs(the_plan, read_jobs(runner))
        result["blocking_jobs"] = blocked
        if blocked and not params["force"]:
            details = dict(result)
            details["changed"] = False
            raise SlurmInputError(
                "refusing to remove what %d active job(s) use: %s (let them end, or force: true)" % (
                    len(blocked), describe([dict(job, nodes=None) for job in blocked])), **details)

    if not module.check_mode:
        done = []
        for command in the_plan.commands:
            try:
                runner.run("sacctmgr", command, data=load_file if tuple(command) == LOAD_COMMAND else None)
            except SlurmCommandError as error:
                error.details.update(result, commands_done=[["sacctmgr"] + c for c in done])
                raise
            done.append(command)
        if done:
            remaining = plan(AccountingState(runner, state.cluster), purge=params["purge"],
                             defer_tres=params["defer_tres"], **entities)
            if remaining.commands:
                raise SlurmError(
                    "sacctmgr accepted every change, but slurmdbd still differs from the input: %s" % (
                        "; ".join(" ".join(c) for c in remaining.commands)), **result)

    if module._diff:
        result["diff"] = dict(
            before=dict((kind, dict((n, c["before"]) for n, c in result["changes"][kind].items())) for kind in _KINDS),
            after=dict((kind, dict((n, c["after"]) for n, c in result["changes"][kind].items())) for kind in _KINDS))
    result["msg"] = _message(the_plan, module.check_mode)
    return result


def _message(the_plan, check_mode):
    counts = {}
    for change in the_plan.changes:
        counts[(change.action, change.kind)] = counts.get((change.action, change.kind), 0) + 1
    parts = ["%s %d %s" % (verb, counts[(action, kind)], kind)
             for action, verb in _VERBS for kind in _KINDS if (action, kind) in counts]
    deferred = ("; left for a run after slurmctld registers their TRES: %s" % ", ".join(the_plan.deferred)
                if the_plan.deferred else "")
    if not parts:
        return "accounting already as listed" + deferred
    return "%s%s in %d sacctmgr call(s)%s" % ("would have " if check_mode else "", ", ".join(parts),
                                              len(the_plan.commands), deferred)


def main():
    state = dict(type="str", choices=["present", "absent"], default="present")
    argument_spec = dict(
        cluster=dict(type="str"),
        qos=dict(type="list", elements="dict", default=[], options=dict(
            name=dict(type="str", required=True),
            state=state,
            description=dict(type="str"),
            priority=dict(type="int"),
            preempt=dict(type="list", elements="str"),
            preempt_mode=dict(type="str"),
            grp_tres=dict(type="raw"),
            max_tres_per_user=dict(type="raw"),
            max_tres_per_job=dict(type="raw"),
            max_jobs_per_user=dict(type="int"),
            max_submit_jobs_per_user=dict(type="int"),
            max_wall=dict(type="raw"),
            flags=dict(type="list", elements="str"),
        )),
        accounts=dict(type="list", elements="dict", default=[], options=dict(
            name=dict(type="str", required=True),
            state=state,
            parent=dict(type="str"),
            description=dict(type="str"),
            organization=dict(type="str"),
            fairshare=dict(type="str"),
            qos=dict(type="list", elements="str"),
            default_qos=dict(type="str"),
        )),
        users=dict(type="list", elements="dict", default=[], options=dict(
            name=dict(type="str", required=True),
            state=state,
            default_account=dict(type="str"),
            admin_level=dict(type="str"),
            associations=dict(type="list", elements="dict", default=[], options=dict(
                account=dict(type="str", required=True),
                partition=dict(type="str"),
                state=state,
            )),
        )),
        purge=dict(type="bool", default=False),
        force=dict(type="bool", default=False),
        defer_tres=dict(type="list", elements="str", default=[]),
    )
    argument_spec.update(SLURM_COMMON_ARGUMENT_SPEC)
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    runner = SlurmRunner(module, module.params["slurm_conf"])
    try:
        result = run(module, runner)
    except SlurmError as error:
        module.fail_json(msg=str(error), **error.result())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
