# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Read Slurm nodes and plan state changes (drain, undrain/resume, down, power down) for hpc.slurm_k8s.

Private to hpc.slurm_k8s. Parsing reads `scontrol show node --oneliner`, the one node format that
Slurm 22.05 through 26.05 all print (22.05 has no `scontrol --json`; `sinfo --json` changes shape
between releases). Checked against each: T2 runs the modules on 22.05, T3 on 24.11 and 26.05, and the unit
cases hold 24.11's and 26.05's real output.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import time

from ansible_collections.hpc.slurm_k8s.plugins.module_utils._slurm_hostlist import expand, sort_names
from ansible_collections.hpc.slurm_k8s.plugins.module_utils._slurm_jobs import describe
from ansible_collections.hpc.slurm_k8s.plugins.module_utils._slurm_runner import (
    SlurmCommandError,
    SlurmInputError,
    SlurmTimeoutError,
)

# Drain/down reasons written by this collection start with this tag, followed by the purpose
# (`hpc.slurm_k8s:upgrade ...`). Only such nodes are ever returned to service without force.
REASON_TAG = "hpc.slurm_k8s"
TAG_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")

# A node with one of these flags is powered down or on its way there (POWER_DOWN: requested, done
# once it is idle; POWER_DRAIN: the drain of a POWER_DOWN_ASAP).
_POWERING_DOWN_FLAGS = ("powered_down", "powering_down", "power_down", "power_drain")

# A job on a node in one of these base states or with this flag keeps a drain from completing.
_BUSY_BASE_STATES = ("allocated", "mixed")
_BUSY_FLAGS = ("completing",)

# `Reason=<text> [<user>@<time>]`: the text is free (spaces, '=' and brackets allowed), so it is cut
# out before the remaining Key=Value pairs are split. Without the [user@time] suffix (not seen in
# practice, but cheap to allow) the text ends at the next Key= or at the end of the line.
_REASON_STAMPED = re.compile(r"(?:^|\s)Reason=(?P<text>.*?) \[(?P<user>[^\]\s@]+)@(?P<time>[^\]\s]+)\](?=\s|$)")
_REASON_BARE = re.compile(r"(?:^|\s)Reason=(?P<text>.*?)(?=\s+[A-Z][A-Za-z0-9_]*=|\s*$)")


_NODE_FIELDS = frozenset((
    "NodeName", "State", "CPUTot", "CPUAlloc", "RealMemory", "AllocMem", "Partitions",
    "AvailableFeatures", "NodeAddr", "Version",
))


def _int_or_none(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def parse_oneliner(line, wanted=None):
    """Split one `scontrol show ... --oneliner` record into a dict of raw strings.

    Only `Reason` (cut out first) may hold spaces among the fields read here; the other values with
    spaces (OS, Comment, Extra) leave word fragments without '=' that are skipped. The first
    occurrence of a key wins, so free text later in the line cannot override a field.
    """
    fields = {}
    reason = ("Reason=" in line) and (_REASON_STAMPED.search(line) or _REASON_BARE.search(line))
    if reason:
        groups = reason.groupdict()
        fields["Reason"] = groups["text"]
        fields["_ReasonUser"] = groups.get("user")
        fields["_ReasonTime"] = groups.get("time")
        line = line[:reason.start()] + " " + line[reason.end():]
    for token in line.split():
        key, sep, value = token.partition("=")
        if sep and key not in fields and (wanted is None or key in wanted):
            fields[key] = value
    return fields


def parse_state(raw):
    """`MIXED+DRAIN+NOT_RESPONDING` -> ('mixed', ['drain', 'not_responding'])."""
    parts = [part.strip().rstrip("*~#!%$@^-").lower() for part in raw.split("+") if part.strip()]
    if not parts:
        return "unknown", []
    return parts[0], parts[1:]


def drain_state(base, flags):
    """`drained` once no job is left on a draining node, `draining` before, None without DRAIN."""
    if "drain" not in flags:
        return None
    if base in _BUSY_BASE_STATES or any(flag in flags for flag in _BUSY_FLAGS):
        return "draining"
    return "drained"


def parse_nodes(output):
    """Parse `scontrol show node --oneliner` into a list of node dicts (module return format)."""
    nodes = []
    for line in output.splitlines():
        if not line.startswith("NodeName="):
            continue
        raw = parse_oneliner(line, _NODE_FIELDS)
        base, flags = parse_state(raw.get("State", ""))
        reason = raw.get("Reason") or None
        partitions = raw.get("Partitions") or ""
        nodes.append(dict(
            name=raw["NodeName"],
            state=base,
            flags=flags,
            state_string=raw.get("State", ""),
            drain_state=drain_state(base, flags),
            reason=reason,
            reason_user=raw.get("_ReasonUser"),
            reason_time=raw.get("_ReasonTime"),
            ours=owner_tag(reason) is not None,
            cpus=_int_or_none(raw.get("CPUTot")),
            cpus_allocated=_int_or_none(raw.get("CPUAlloc")),
            real_memory=_int_or_none(raw.get("RealMemory")),
            allocated_memory=_int_or_none(raw.get("AllocMem")),
            partitions=[p for p in partitions.split(",") if p],
            features=[f for f in (raw.get("AvailableFeatures") or "").split(",") if f and f != "(null)"],
            address=raw.get("NodeAddr"),
            version=raw.get("Version"),
            jobs=[],
        ))
    return nodes


def owner_tag(reason):
    """The purpose tag of a reason this collection wrote (`hpc.slurm_k8s:<tag> ...`), else None."""
    if not reason or not reason.startswith(REASON_TAG + ":"):
        return None
    return reason[len(REASON_TAG) + 1:].split(" ", 1)[0] or None


def tagged_reason(tag, reason):
    return "%s:%s %s" % (REASON_TAG, tag, reason)


class NodeTable:
    """The nodes of one cluster as read by one `scontrol show node` (one call for any number)."""

    def __init__(self, runner):
        self.runner = runner
        self.nodes = {}
        self.order = []
        self.refresh()

    def refresh(self):
        self.stale = False
        parsed = parse_nodes(self.runner.show_nodes())
        self.nodes = dict((node["name"], node) for node in parsed)
        self.order = [node["name"] for node in parsed]

    def select(self, expressions):
        """Names of the nodes the expressions denote (`ALL` = every node), validated to exist."""
        if any(expr.strip().upper() == "ALL" for expr in expressions):
            return list(self.order)
        names = []
        unknown = []
        for expression, group in zip(expressions, expand(self.runner, expressions)):
            if not group:
                raise SlurmInputError("hostlist expression %r denotes no node" % expression)
            for name in group:
                (names if name in self.nodes else unknown).append(name)
        if unknown:
            raise SlurmInputError(
                "unknown node(s) %s: Slurm knows %d node(s)%s" % (
                    ", ".join(sort_names(unknown)), len(self.nodes),
                    (" (" + self.runner.compress_hostlist(self.order) + ")") if self.order else ""))
        return sort_names(names)

    def attach_jobs(self, jobs):
        """Fill each node's `jobs` with the ids of the jobs that hold it (from slurm_jobs.list_jobs)."""
        for job in jobs:
            for name in job.get("node_names", []):
                if name in self.nodes:
                    self.nodes[name]["jobs"].append(job["job_id"])


def view(node):
    """What diff and the per-node results show of a node."""
    return dict(state=node["state_string"], reason=node["reason"])


class NodePlan:
    """What `slurm_node` will do: nodes grouped by scontrol action, plus those left alone."""

    def __init__(self):
        self.actions = {}      # scontrol state (DRAIN, UNDRAIN, RESUME, DOWN, POWER_DOWN_ASAP) -> [names]
        self.unchanged = []    # already in the desired state
        self.skipped = {}      # name -> why it is left alone although not in the desired state

    def add(self, action, name):
        self.actions.setdefault(action, []).append(name)

    @property
    def changed_names(self):
        return sort_names(n for names in self.actions.values() for n in names)


def plan(table, names, state, tag, force):
    """Decide per node what reaching `state` takes. Pure: reads `table`, changes nothing."""
    result = NodePlan()
    for name in names:
        node = table.nodes[name]
        node_tag = owner_tag(node["reason"])
        ours = node_tag == tag
        if state == "powered_down":
            if any(flag in node["flags"] for flag in _POWERING_DOWN_FLAGS):
                result.unchanged.append(name)
            elif "cloud" not in node["flags"] and not force:
                result.skipped[name] = "not a power-saving (State=CLOUD) node: powering it down is not ours to do (force: true overrides)"
            elif "drain" in node["flags"] and not ours and not force:
                # the power-down would end their drain: Slurm clears it once the node is down
                result.skipped[name] = _foreign(node, tag).replace("not ours to resume", "not ours to power down")
            else:
                result.add("POWER_DOWN_ASAP", name)
        elif state == "drained":
            if "drain" in node["flags"]:
                result.unchanged.append(name)
            else:
                result.add("DRAIN", name)
        elif state == "down":
            if node["state"] == "down":
                result.unchanged.append(name)
            elif (node["state"] in _BUSY_BASE_STATES or "completing" in node["flags"]) and not force:
                result.skipped[name] = "jobs are running on it: setting it down would kill or requeue them (drain it first, or force: true)"
            else:
                result.add("DOWN", name)
        else:  # resumed
            if "drain" in node["flags"]:
                if ours or force:
                    result.add("UNDRAIN", name)
                else:
                    result.skipped[name] = _foreign(node, tag)
            elif node["state"] == "down":
                if ours or force:
                    result.add("RESUME", name)
                else:
                    result.skipped[name] = _foreign(node, tag)
            else:
                result.unchanged.append(name)
    return result


def _foreign(node, tag):
    reason = node["reason"] or "no reason"
    owner = owner_tag(node["reason"])
    if owner is None:
        who = "by %s" % node["reason_user"] if node["reason_user"] else "outside hpc.slurm_k8s"
        return "%s %s (%s): not ours to resume (force: true overrides)" % (
            "drained" if "drain" in node["flags"] else "down", who, reason)
    return "drained for another purpose (%s:%s, not %s): left alone (force: true overrides)" % (
        REASON_TAG, owner, tag)


def predicted(node, action, reason):
    """The node's state string and reason after `action`, for check mode's diff."""
    base, flags = node["state"], list(node["flags"])
    if action == "DRAIN":
        flags.append("drain")
    elif action == "UNDRAIN":
        flags = [f for f in flags if f != "drain"]
        reason = None
    elif action == "RESUME":
        base, reason = "idle", None
        flags = [f for f in flags if f not in ("drain", "not_responding")]
    elif action == "DOWN":
        base = "down"
    elif action == "POWER_DOWN_ASAP":
        flags += ["drain", "power_down"]
    return dict(state="+".join([base.upper()] + [f.upper() for f in flags]), reason=reason)


_WITH_REASON = ("DRAIN", "DOWN", "POWER_DOWN_ASAP")


def apply_plan(table, node_plan, reason):
    """One scontrol call per action for the whole set of nodes it applies to.

    Returns {action: hostlist} of what was done.
    """
    done = {}
    for action in ("DRAIN", "DOWN", "POWER_DOWN_ASAP", "UNDRAIN", "RESUME"):
        names = node_plan.actions.get(action)
        if names:
            hostlist = table.runner.compress_hostlist(names)
            table.stale = True
            try:
                table.runner.update_nodes(hostlist, action, reason if action in _WITH_REASON else None)
            except SlurmCommandError as error:
                if not _done_despite_error(table, error, action, names):
                    raise
            done[action] = hostlist
    return done


def _done_despite_error(table, error, action, names):
    """Slurm applies UNDRAIN/RESUME to nodes that never registered (state UNKNOWN) but still answers
    "Invalid node state specified". Accept that answer only if reading the nodes again shows every
    one of them changed as asked."""
    if action not in ("UNDRAIN", "RESUME") or "Invalid node state" not in (error.stderr or ""):
        return False
    table.refresh()
    if action == "UNDRAIN":
        return all("drain" not in table.nodes[name]["flags"] for name in names)
    return all(table.nodes[name]["state"] != "down" and "drain" not in table.nodes[name]["flags"] for name in names)


def wait_drained(table, names, timeout, interval, list_jobs):
    """Poll until every node in `names` is drained (no job left on it), or raise SlurmTimeoutError."""
    deadline = time.monotonic() + timeout
    while True:
        table.refresh()
        busy = [n for n in names if table.nodes[n]["drain_state"] == "draining"]
        if not busy:
            return
        if time.monotonic() >= deadline:
            hostlist = table.runner.compress_hostlist(busy)
            jobs = list_jobs(hostlist)
            raise SlurmTimeoutError(
                "timed out after %ss waiting for %d node(s) to drain: %s still hold job(s) %s" % (
                    timeout, len(busy), hostlist, describe(jobs) or "(none listed: completing)"),
                draining_nodes=busy, jobs=jobs)
        time.sleep(interval)
