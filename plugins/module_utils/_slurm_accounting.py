# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Declarative Slurm accounting (QoS, accounts, users, associations) through sacctmgr.

Private to hpc.slurm_k8s. The flow is the one of the node modules: read everything once
(`sacctmgr --parsable2 --noheader show ...`), validate the whole input against it, plan, and only
then apply, grouping every entity that takes the same change into one `sacctmgr -i` call.

Facts this relies on, observed on Slurm 22.05 and 24.11:
- sacctmgr lower-cases account, user and QoS names, descriptions and organizations (22.05 and 24.11):
  names and those two texts are compared without case.
- a command that changes nothing exits 1 ("Nothing modified"/"Nothing new added"): the plan never
  issues one.
- deleting an account or a user association with running jobs is NOT refused by slurmdbd 22.05 (the
  association is gone, the job runs on without it): this module refuses it itself, from the queue.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.hpc.slurm_k8s.plugins.module_utils._slurm_runner import SlurmError, SlurmInputError

# Slurm's own entities that purge never removes: the root of the account tree, its user and the
# default QoS every association starts with.
PROTECTED_ACCOUNTS = ("root",)
PROTECTED_USERS = ("root",)
PROTECTED_QOS = ("normal",)

# QoS flags of Slurm 22.05 and 24.11 (sacctmgr(1), section "SPECIFICATIONS FOR QOS").
QOS_FLAGS = (
    "DenyOnLimit", "EnforceUsageThreshold", "NoDecay", "NoReserve", "OverPartQOS",
    "PartitionMaxNodes", "PartitionMinNodes", "PartitionTimeLimit", "RequiresReservation",
    "UsageFactorSafe", "Relative",
)
PREEMPT_MODES = ("cluster", "off", "cancel", "gang", "requeue", "suspend")
ADMIN_LEVELS = ("none", "operator", "administrator")

# Job states after which a job holds nothing of its association any more; every other state
# (including ones a newer Slurm may add) counts as active, so an unknown state refuses a removal.
FINISHED_JOB_STATES = (
    "boot_fail", "cancelled", "completed", "deadline", "failed", "node_fail", "out_of_memory",
    "preempted", "revoked", "timeout",
)

_NAME = re.compile(r"^[a-z0-9_][a-z0-9_.@-]*$")
_MEMORY_UNITS = {"k": 1.0 / 1024, "m": 1, "g": 1024, "t": 1024 ** 2, "p": 1024 ** 3}
_TRES_VALUE = re.compile(r"^(?P<number>\d+)(?P<unit>[kmgtp])?$", re.IGNORECASE)
_UNLIMITED = ("", "-1", "unlimited", "infinite")


# ---------------------------------------------------------------------------------------- values
class Property:
    """One setting of an entity: its option name, sacctmgr key, and how values compare and print."""

    def __init__(self, option, key, kind):
        self.option, self.key, self.kind = option, key, kind

    def normalize(self, value, where):
        """The input value in the form current values are read into (None = no limit/empty)."""
        return _NORMALIZE[self.kind](value, "%s.%s" % (where, self.option))

    def differs(self, desired, current):
        if self.kind == "text":
            return (desired or "").lower() != (current or "").lower()
        return desired != current

    def command(self, desired, current):
        """`Key=value` that takes `current` to `desired`."""
        if self.kind == "tres":
            items = ["%s=%s" % (name, _tres_text(name, desired[name])) for name in sorted(desired)]
            items += ["%s=-1" % name for name in sorted(set(current or {}) - set(desired))]
            return "%s=%s" % (self.key, ",".join(items))
        if desired is None or (self.kind == "flags" and not desired):
            return "%s=%s" % (self.key, "" if self.kind in ("names", "text") else "-1")
        return "%s=%s" % (self.key, show(self.kind, desired, for_command=True))


def _text(value, where):
    if value is None:
        return None
    value = str(value).strip()
    if "|" in value or "\n" in value or "'" in value or '"' in value:
        raise SlurmInputError("%s: %r may not contain quotes, '|' or a line break" % (where, value))
    return value


def _name(value, where):
    value = _text(value, where)
    return check_name(value.lower(), where) if value is not None else None


def _integer(value, where):
    if value is None or str(value).strip().lower() in _UNLIMITED:
        return None
    try:
        number = int(str(value).strip())
    except ValueError:
        raise SlurmInputError("%s: %r is not a whole number (use -1 for no limit)" % (where, value))
    if number < 0:
        raise SlurmInputError("%s: %r is negative (use -1 for no limit)" % (where, value))
    return number


def _names(value, where):
    if value is None:
        return frozenset()
    items = value.split(",") if isinstance(value, str) else list(value)
    names = frozenset(str(item).strip().lower() for item in items if str(item).strip())
    for name in names:
        check_name(name, where)
    return names


def _flags(value, where):
    names = frozenset(str(item).strip().lower() for item in
                      (value.split(",") if isinstance(value, str) else (value or [])) if str(item).strip())
    known = dict((flag.lower(), flag) for flag in QOS_FLAGS)
    unknown = sorted(names - set(known))
    if unknown:
        raise SlurmInputError("%s: unknown QoS flag(s) %s: expected some of %s" % (
            where, ", ".join(unknown), ", ".join(QOS_FLAGS)))
    return frozenset(known[name] for name in names)


def _choice(choices):
    def normalize(value, where):
        if value is None:
            return None
        value = str(value).strip().lower()
        if value not in choices:
            raise SlurmInputError("%s: %r is not one of %s" % (where, value, ", ".join(choices)))
        return value
    return normalize


def _fairshare(value, where):
    if value is None:
        return None
    value = str(value).strip().lower()
    if value == "parent" or (value.isdigit() and int(value) > 0):
        return value
    raise SlurmInputError("%s: %r is not a positive whole number or 'parent'" % (where, value))


def parse_minutes(value, where="value"):
    """A Slurm time limit (`30`, `30:00`, `2:00:00`, `1-12`, `1-00:00:00`) in minutes; None = none."""
    if value is None or str(value).strip().lower() in _UNLIMITED:
        return None
    text = str(value).strip()
    match = re.match(r"^(?:(?P<days>\d+)-)?(?P<rest>\d+(?::\d+){0,2})$", text)
    if not match:
        raise SlurmInputError("%s: %r is not a Slurm time (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or "
                              "D-HH:MM:SS; -1 for no limit)" % (where, value))
    parts = [int(part) for part in match.group("rest").split(":")]
    if match.group("days") is not None:
        hours, minutes, seconds = (parts + [0, 0])[:3]
        total = int(match.group("days")) * 1440 + hours * 60 + minutes + seconds / 60.0
    elif len(parts) == 3:
        total = parts[0] * 60 + parts[1] + parts[2] / 60.0
    elif len(parts) == 2:
        total = parts[0] + parts[1] / 60.0
    else:
        total = parts[0]
    # Slurm keeps time limits in whole minutes and rounds seconds up
    return int(-(-total // 1))


def _minutes(value, where):
    return parse_minutes(value, where)


def parse_tres(value, where="value"):
    """`cpu=8,mem=100G,gres/gpu=2` (or a dict) as {name: int}, memory in MiB."""
    if value is None:
        return {}
    if isinstance(value, dict):
        items = list(value.items())
    else:
        items = []
        for item in str(value).split(","):
            if item.strip():
                name, sep, number = item.partition("=")
                if not sep:
                    raise SlurmInputError("%s: %r is not a TRES list (name=count,...)" % (where, value))
                items.append((name, number))
    tres = {}
    for name, number in items:
        name = str(name).strip().lower()
        match = _TRES_VALUE.match(str(number).strip())
        if not name or not match:
            raise SlurmInputError("%s: TRES %s=%s is not name=count (memory may take K, M, G, T or P)" % (
                where, name, number))
        amount = int(match.group("number"))
        unit = (match.group("unit") or "").lower()
        if unit and name != "mem":
            raise SlurmInputError("%s: TRES %s=%s: only mem takes a unit" % (where, name, number))
        if name == "mem":
            amount = int(-(-amount * _MEMORY_UNITS[unit or "m"] // 1))
        tres[name] = amount
    return tres


def _tres_text(name, amount):
    return "%dM" % amount if name == "mem" else str(amount)


_NORMALIZE = dict(text=_text, name=_name, int=_integer, names=_names, flags=_flags, minutes=_minutes,
                  tres=parse_tres, fairshare=_fairshare,
                  preempt_mode=_choice(PREEMPT_MODES), admin_level=_choice(ADMIN_LEVELS))


def show(kind, value, for_command=False):
    """A normalized value as diff shows it, or as a command writes it."""
    if value is None:
        return None
    if kind in ("names", "flags"):
        return ",".join(sorted(value))
    if kind == "tres":
        return ",".join("%s=%s" % (name, _tres_text(name, value[name])) for name in sorted(value)) or None
    if kind == "minutes":
        if for_command:
            return str(value)
        days, rest = divmod(value, 1440)
        return ("%d-" % days if days else "") + "%02d:%02d:00" % divmod(rest, 60)
    if kind == "admin_level" and for_command:
        return value.capitalize()
    return value if isinstance(value, str) else str(value)


QOS_PROPERTIES = (
    Property("description", "Description", "text"),
    Property("priority", "Priority", "int"),
    Property("preempt", "Preempt", "names"),
    Property("preempt_mode", "PreemptMode", "preempt_mode"),
    Property("grp_tres", "GrpTRES", "tres"),
    Property("max_tres_per_user", "MaxTRESPerUser", "tres"),
    Property("max_tres_per_job", "MaxTRESPerJob", "tres"),
    Property("max_jobs_per_user", "MaxJobsPerUser", "int"),
    Property("max_submit_jobs_per_user", "MaxSubmitJobsPerUser", "int"),
    Property("max_wall", "MaxWall", "minutes"),
    Property("flags", "Flags", "flags"),
)
# `description` and `organization` belong to the account record, the others to its association in
# the cluster; one `modify account ... cluster=<name> set` changes both.
ACCOUNT_PROPERTIES = (
    Property("description", "Description", "text"),
    Property("organization", "Organization", "text"),
    Property("parent", "Parent", "name"),
    Property("fairshare", "Fairshare", "fairshare"),
    Property("qos", "QOS", "names"),
    Property("default_qos", "DefaultQOS", "name"),
)
USER_PROPERTIES = (
    Property("default_account", "DefaultAccount", "name"),
    Property("admin_level", "AdminLevel", "admin_level"),
)


def check_name(name, where):
    if not _NAME.match(name):
        raise SlurmInputError("%s: %r is not a valid Slurm name (letters, digits, '_', '.', '-', '@')" % (where, name))
    return name


# ------------------------------------------------------------------------------------------ read
_QOS_FORMAT = "name,priority,preempt,preemptmode,grptres,maxtrespu,maxtres,maxjobspu,maxsubmitpu,maxwall,flags,description"
_ASSOC_FORMAT = "account,user,partition,parentname,share,qos,defaultqos"


def _rows(output, fields):
    """parsable2 lines split into `fields` (the last field, free text, may hold the separator)."""
    rows = []
    for line in output.splitlines():
        if not line.strip():
            continue
        values = line.split("|", fields - 1)
        if len(values) != fields:
            raise SlurmError("unexpected sacctmgr output line (%d fields expected): %r" % (fields, line))
        rows.append(values)
    return rows


class AccountingState:
    """What slurmdbd holds for one cluster, read once: qos, accounts, users (name -> settings)."""

    def __init__(self, runner, cluster=None):
        self.runner = runner
        clusters = [row[0].lower() for row in _rows(self.show(["cluster", "format=cluster"]), 1)]
        if cluster is None:
            if len(clusters) != 1:
                raise SlurmInputError(
                    "slurmdbd knows %s: set cluster to the one to manage" % (
                        "%d clusters (%s)" % (len(clusters), ", ".join(clusters)) if clusters
                        else "no cluster (slurmctld registers its cluster when it first connects to slurmdbd)"))
            cluster = clusters[0]
        elif cluster.lower() not in clusters:
            raise SlurmInputError("cluster %r is not registered in slurmdbd (it knows: %s)" % (
                cluster, ", ".join(clusters) or "none"))
        self.cluster = cluster.lower()
        self.qos = {}
        for row in _rows(self.show(["qos", "format=%s" % _QOS_FORMAT]), 12):
            (name, priority, preempt, mode, grp, per_user, per_job, jobs, submit, wall, flags, description) = row
            self.qos[name.lower()] = dict(
                description=description.lower(), priority=_integer(priority, "priority"),
                preempt=_names(preempt, "preempt"), preempt_mode=mode.lower() or "cluster",
                grp_tres=parse_tres(grp), max_tres_per_user=parse_tres(per_user),
                max_tres_per_job=parse_tres(per_job), max_jobs_per_user=_integer(jobs, "jobs"),
                max_submit_jobs_per_user=_integer(submit, "submit"), max_wall=parse_minutes(wall),
                flags=_flags(flags, "flags"))
        records = dict((row[0].lower(), row) for row in _rows(
            self.show(["account", "format=account,organization,description"]), 3))
        self.accounts = {}
        self.users = {}
        self.associations = set()   # (user, account, partition or "")
        for account, user, partition, parent, share, qos, default_qos in _rows(
                self.show(["association", "cluster=%s" % self.cluster, "format=%s" % _ASSOC_FORMAT]), 7):
            account, user, partition = account.lower(), user.lower(), partition.lower()
            if user:
                self.associations.add((user, account, partition))
                continue
            record = records.get(account, [account, "", ""])
            self.accounts[account] = dict(
                description=record[2].lower(), organization=record[1].lower(), parent=parent.lower() or None,
                fairshare=share.lower() or None, qos=_names(qos, "qos"), default_qos=default_qos.lower() or None)
        for user, default_account, admin_level in _rows(
                self.show(["user", "format=user,defaultaccount,adminlevel"]), 3):
            user = user.lower()
            if any(assoc[0] == user for assoc in self.associations):
                self.users[user] = dict(default_account=default_account.lower() or None,
                                        admin_level=admin_level.lower() or "none")
        self._tres = None

    def show(self, args):
        return self.runner.run("sacctmgr", ["--parsable2", "--noheader", "show"] + list(args))

    @property
    def tres(self):
        """TRES names slurmdbd knows (`cpu`, `gres/gpu`, ...), read when a limit names one."""
        if self._tres is None:
            self._tres = set()
            for kind, name in _rows(self.show(["tres", "format=type,name"]), 2):
                self._tres.add(("%s/%s" % (kind, name) if name else kind).lower())
        return self._tres

    def user_associations(self, user):
        return set((account, partition) for name, account, partition in self.associations if name == user)


# ------------------------------------------------------------------------------------------ plan
class Change:
    """One planned change of one entity, for results and diff."""

    def __init__(self, kind, name, action, before=None, after=None):
        self.kind, self.name, self.action, self.before, self.after = kind, name, action, before, after


# The one sacctmgr call that adds every new account, user and association: `sacctmgr load` reads the flat file
# from its standard input (the format of `sacctmgr dump`). sacctmgr spends about as long on each command as on
# this whole file (on 22.05 each of its requests to slurmdbd waits ~40 ms for TCP's delayed ACK), so 1,000
# users in 50 accounts are one call instead of one per account.
LOAD_COMMAND = ("-i", "load", "file=/dev/stdin")


class AccountingPlan:
    """Changes grouped into as few sacctmgr calls as possible, in an order Slurm accepts: the QoS first (the
    accounts refer to them), then one `load` of every addition, then modifications, then removals."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.changes = []
        self.commands = []
        self.removals = dict(accounts=[], users=[], associations=[], qos=[])
        self.deferred = []
        # additions for the load file: (parent, account, options) in creation order, (account, user, options)
        self.new_accounts = []
        self.new_associations = []

    def add_command(self, args):
        self.commands.append(["-i"] + list(args))

    def add_load(self):
        """The load command, in the commands' order, when there is anything to add."""
        if self.new_accounts or self.new_associations:
            self.commands.append(list(LOAD_COMMAND))

    def load_file(self):
        """The flat file of the load command: Parent lines before the accounts and users under them, every
        parent account before its children (created in this file or existing). None when nothing is added."""
        if not (self.new_accounts or self.new_associations):
            return None
        lines = ["Cluster - '%s'" % self.cluster]
        parent = None
        for account_parent, name, options in self.new_accounts:
            if account_parent != parent:
                parent = account_parent
                lines.append("Parent - '%s'" % parent)
            lines.append(_load_line("Account", name, options))
        for account, user, options in sorted(self.new_associations, key=lambda item: item[:2]):
            if account != parent:
                parent = account
                lines.append("Parent - '%s'" % parent)
            lines.append(_load_line("User", user, options))
        return "\n".join(lines) + "\n"


def _load_line(kind, name, options):
    """`Account - 'name':Key='value':...` (values never hold quotes: _text refuses them)."""
    return "%s - '%s'" % (kind, name) + "".join(":%s='%s'" % (key, value) for key, value in options)


def _desired_entries(entries, kind, properties):
    """Normalize a list of input entries into {name: entry}; duplicates are an error."""
    result = {}
    for index, entry in enumerate(entries or []):
        where = "%s[%s]" % (kind, entry.get("name") if entry.get("name") else index)
        name = check_name(str(entry.get("name") or "").strip().lower(), where)
        if name in result:
            raise SlurmInputError("%s: listed twice (Slurm names are not case-sensitive)" % where)
        normalized = dict(state=entry.get("state") or "present", where=where, given=set())
        for prop in properties:
            if entry.get(prop.option) is not None:
                normalized[prop.option] = prop.normalize(entry[prop.option], where)
                normalized["given"].add(prop.option)
        result[name] = normalized
    return result


def _settings(entry, properties):
    return dict((prop.option, entry[prop.option]) for prop in properties if prop.option in entry["given"])


def _view(values, properties):
    return dict((prop.option, show(prop.kind, values.get(prop.option))) for prop in properties if prop.option in values)


def _plan_modify(result, modifies, kind, name, settings, current, properties):
    """Record the `set` arguments that take `current` to `settings` (grouped in `modifies` with the
    other entities that take the same ones) and the change, before/after of what differs only."""
    differing = [prop for prop in properties if prop.option in settings
                 and prop.differs(settings[prop.option], current[prop.option])]
    if differing:
        args = [prop.command(settings[prop.option], current[prop.option]) for prop in differing]
        modifies.setdefault(tuple(args), []).append(name)
        result.changes.append(Change(kind, name, "modify",
                                     _view(dict((p.option, current[p.option]) for p in differing), differing),
                                     _view(dict((p.option, settings[p.option]) for p in differing), differing)))


def plan(state, qos=None, accounts=None, users=None, purge=False, defer_tres=()):
    """Validate the input against `state` and return the AccountingPlan. Pure apart from reading TRES.

    A QoS limit on a TRES of `defer_tres` that slurmdbd does not know yet (slurmctld registers the TRES
    of AccountingStorageTRES when it loads a new slurm.conf) is left out and listed in plan.deferred."""
    want_qos = _desired_entries(qos, "qos", QOS_PROPERTIES)
    want_accounts = _desired_entries(accounts, "accounts", ACCOUNT_PROPERTIES)
    want_users = _desired_entries(users, "users", USER_PROPERTIES)
    for name, entry in want_users.items():
        entry["associations"] = _desired_associations(name, entry, users)

    result = AccountingPlan(state.cluster)
    cluster = "cluster=%s" % state.cluster
    deferrable = set(str(name).strip().lower() for name in defer_tres or ())
    for name, entry in sorted(want_qos.items()):
        for option in ("grp_tres", "max_tres_per_user", "max_tres_per_job"):
            unknown = set(entry[option]) - state.tres if entry.get(option) else set()
            if unknown and unknown <= deferrable:
                entry["given"].discard(option)
                result.deferred.append("%s.%s" % (entry["where"], option))

    # ---- what will exist afterwards (for validation)
    qos_after = set(state.qos)
    qos_after |= set(n for n, e in want_qos.items() if e["state"] == "present")
    qos_removed = set(n for n, e in want_qos.items() if e["state"] == "absent" and n in state.qos)
    if purge:
        qos_removed |= set(n for n in state.qos if n not in want_qos and n not in PROTECTED_QOS)
    qos_after -= qos_removed
    accounts_after = set(state.accounts) | set(n for n, e in want_accounts.items() if e["state"] == "present")
    accounts_removed = set(n for n, e in want_accounts.items() if e["state"] == "absent" and n in state.accounts)
    if purge:
        accounts_removed |= set(n for n in state.accounts if n not in want_accounts and n not in PROTECTED_ACCOUNTS)
    for name in PROTECTED_ACCOUNTS:
        if name in accounts_removed:
            raise SlurmInputError("accounts[%s]: the root of Slurm's account tree cannot be removed" % name)
    # removing an account removes its sub-accounts with it: say so rather than do it silently
    parents_after = dict((n, a.get("parent")) for n, a in state.accounts.items())
    parents_after.update((n, e.get("parent", parents_after.get(n)) or "root")
                         for n, e in want_accounts.items() if e["state"] == "present")
    accounts_after -= accounts_removed

    _validate(state, want_qos, want_accounts, want_users, qos_after, qos_removed, accounts_after,
              accounts_removed, parents_after)

    # ---- QoS: add, modify (removals at the end, once nothing refers to them)
    adds = {}
    modifies = {}
    for name, entry in sorted(want_qos.items()):
        if entry["state"] == "absent":
            continue
        current = state.qos.get(name)
        settings = _settings(entry, QOS_PROPERTIES)
        if current is None:
            args = [prop.command(settings[prop.option], None) for prop in QOS_PROPERTIES if prop.option in settings]
            adds.setdefault(tuple(args), []).append(name)
            result.changes.append(Change("qos", name, "add", None, _view(settings, QOS_PROPERTIES)))
            continue
        _plan_modify(result, modifies, "qos", name, settings, current, QOS_PROPERTIES)
    for args, names in sorted(adds.items(), key=lambda item: item[1]):
        result.add_command(["add", "qos", ",".join(names)] + list(args))
    for args, names in sorted(modifies.items(), key=lambda item: item[1]):
        result.add_command(["modify", "qos", "where", "name=%s" % ",".join(names), "set"] + list(args))

    # ---- accounts: added by the load file, parents before children; modified after it
    new_accounts = [n for n, e in want_accounts.items() if e["state"] == "present" and n not in state.accounts]
    for level in _levels(new_accounts, parents_after):
        for name in sorted(level, key=lambda n: (parents_after.get(n) or "root", n)):
            settings = _settings(want_accounts[name], ACCOUNT_PROPERTIES)
            settings.setdefault("parent", "root")
            result.new_accounts.append((settings["parent"], name, [
                (prop.key, show(prop.kind, settings[prop.option], for_command=True))
                for prop in ACCOUNT_PROPERTIES if prop.option in settings and prop.option != "parent"
                and settings[prop.option] not in (None, frozenset())]))
            result.changes.append(Change("accounts", name, "add", None, _view(settings, ACCOUNT_PROPERTIES)))
    modifies = {}
    for name, entry in sorted(want_accounts.items()):
        current = state.accounts.get(name)
        if entry["state"] == "absent" or current is None:
            continue
        settings = _settings(entry, ACCOUNT_PROPERTIES)
        _plan_modify(result, modifies, "accounts", name, settings, current, ACCOUNT_PROPERTIES)
    account_modifies = sorted(modifies.items(), key=lambda item: item[1])

    # ---- users: new ones and new associations by the load file (a new user's default account on each of its
    # lines: the first one read creates the user), then modified
    user_modifies = {}
    assoc_removes = []
    for name, entry in sorted(want_users.items()):
        if entry["state"] == "absent":
            continue
        current = state.users.get(name)
        settings = _settings(entry, USER_PROPERTIES)
        have = state.user_associations(name) if current else set()
        want = entry["associations"]
        user_options = []
        if current is None:
            user_options = [("DefaultAccount", settings["default_account"])]
            if "admin_level" in settings:
                user_options.append(("AdminLevel", show("admin_level", settings["admin_level"], for_command=True)))
            result.changes.append(Change("users", name, "add", None, dict(
                _view(settings, USER_PROPERTIES), associations=_assoc_view(want))))
        for account, partition in sorted(want - have):
            result.new_associations.append((account, name, user_options + (
                [("Partition", partition)] if partition else [])))
        extra = set(a for a in have - want if a[0] in accounts_after)
        removed_assocs = set(a for a, wanted in entry["association_states"].items() if not wanted) & extra
        if purge:
            removed_assocs = extra
        for account, partition in sorted(removed_assocs):
            assoc_removes.append((name, account, partition, want))
        if current is not None:
            differing = [prop for prop in USER_PROPERTIES if prop.option in settings
                         and prop.differs(settings[prop.option], current[prop.option])]
            if differing:
                args = ["%s=%s" % (prop.key.lower(), show(prop.kind, settings[prop.option], for_command=True))
                        for prop in differing]
                user_modifies.setdefault(tuple(args), []).append(name)
            if differing or want - have or removed_assocs:
                before = dict((p.option, show(p.kind, current[p.option])) for p in differing)
                after = dict((p.option, show(p.kind, settings[p.option])) for p in differing)
                if want - have or removed_assocs:
                    before["associations"] = _assoc_view(have)
                    after["associations"] = _assoc_view((have | want) - removed_assocs)
                result.changes.append(Change("users", name, "modify", before, after))
    result.add_load()
    for args, names in account_modifies:
        result.add_command(["modify", "account", "where", "name=%s" % ",".join(names), cluster, "set"] + list(args))
    for args, names in sorted(user_modifies.items(), key=lambda item: item[1]):
        result.add_command(["modify", "user", "where", "name=%s" % ",".join(names), cluster, "set"] + list(args))

    # ---- removals: user associations, users, accounts (children first), QoS
    for name, account, partition, want in assoc_removes:
        if not partition and any(a == account and p for a, p in want):
            raise SlurmInputError(
                "users[%s]: the association with account %s for all partitions cannot be removed while its "
                "partition associations stay (sacctmgr cannot address it alone)" % (name, account))
        result.removals["associations"].append((name, account, partition))
        result.add_command(["delete", "user", "where", "name=%s" % name, "account=%s" % account]
                           + (["partition=%s" % partition] if partition else []) + [cluster])
    users_removed = sorted(n for n, e in want_users.items() if e["state"] == "absent" and n in state.users)
    if purge:
        users_removed = sorted(set(users_removed) | set(
            n for n in state.users if n not in want_users and n not in PROTECTED_USERS
            and not all(a[1] in accounts_removed for a in state.user_associations(n))))
    for name in users_removed:
        if name in PROTECTED_USERS:
            raise SlurmInputError("users[%s]: Slurm's own root user cannot be removed" % name)
        result.changes.append(Change("users", name, "remove", dict(
            _view(state.users[name], USER_PROPERTIES), associations=_assoc_view(state.user_associations(name))), None))
    if users_removed:
        result.removals["users"] = users_removed
        result.add_command(["delete", "user", "where", "name=%s" % ",".join(users_removed), cluster])
    if accounts_removed:
        ordered = _removal_order(accounts_removed, parents_after)
        for name in ordered:
            result.changes.append(Change("accounts", name, "remove", _view(state.accounts[name], ACCOUNT_PROPERTIES), None))
        result.removals["accounts"] = ordered
        result.add_command(["delete", "account", "where", "name=%s" % ",".join(ordered), cluster])
    if qos_removed:
        names = sorted(qos_removed)
        for name in names:
            result.changes.append(Change("qos", name, "remove", _view(state.qos[name], QOS_PROPERTIES), None))
        result.removals["qos"] = names
        result.add_command(["delete", "qos", "where", "name=%s" % ",".join(names)])
    return result


def _desired_associations(name, entry, users):
    """The (account, partition) pairs a present user must have: its default account, then the listed."""
    raw = next(u for u in users if str(u.get("name") or "").strip().lower() == name)
    entry["association_states"] = {}
    if entry["state"] == "absent":
        return set()
    if "default_account" not in entry["given"]:
        raise SlurmInputError("%s: default_account is required for a present user" % entry["where"])
    wanted = set([(entry["default_account"], "")])
    for index, assoc in enumerate(raw.get("associations") or []):
        where = "%s.associations[%d]" % (entry["where"], index)
        account = check_name(str(assoc.get("account") or "").strip().lower(), where + ".account")
        partition = str(assoc.get("partition") or "").strip().lower()
        if partition:
            check_name(partition, where + ".partition")
        present = (assoc.get("state") or "present") == "present"
        if not present and (account, partition) == (entry["default_account"], ""):
            raise SlurmInputError("%s: the association with the default account %s cannot be absent" % (where, account))
        entry["association_states"][(account, partition)] = present
        if present:
            wanted.add((account, partition))
    return wanted


def _assoc_view(pairs):
    return sorted("%s%s" % (account, ":" + partition if partition else "") for account, partition in pairs)


def _levels(names, parents):
    """New accounts in creation order: lists of accounts whose parents exist before them."""
    pending = set(names)
    levels = []
    while pending:
        level = sorted(n for n in pending if parents.get(n) not in pending)
        levels.append(level)
        pending -= set(level)
    return levels


def _removal_order(names, parents):
    """Accounts to remove, children before their parents."""
    return [n for level in reversed(_levels(sorted(names), parents)) for n in level]


def _validate(state, want_qos, want_accounts, want_users, qos_after, qos_removed, accounts_after,
              accounts_removed, parents):
    for name, entry in sorted(want_qos.items()):
        if entry["state"] == "absent":
            continue
        for option in ("grp_tres", "max_tres_per_user", "max_tres_per_job"):
            unknown = sorted(set(entry[option]) - state.tres) if option in entry["given"] else []
            if unknown:
                raise SlurmInputError("%s.%s: unknown TRES %s: slurmdbd knows %s (AccountingStorageTRES in "
                                      "slurm.conf adds others, e.g. gres/gpu)" % (
                                          entry["where"], option, ", ".join(unknown), ", ".join(sorted(state.tres))))
        missing = sorted(set(entry.get("preempt") or ()) - qos_after)
        if missing:
            raise SlurmInputError("%s.preempt: unknown QoS %s" % (entry["where"], ", ".join(missing)))
        if name in (entry.get("preempt") or ()):
            raise SlurmInputError("%s.preempt: a QoS cannot preempt itself" % entry["where"])
    for name, entry in sorted(want_accounts.items()):
        if entry["state"] == "absent":
            continue
        if entry.get("parent") is not None and entry["parent"] not in accounts_after:
            raise SlurmInputError("%s.parent: account %s does not exist%s" % (
                entry["where"], entry["parent"], " after this change" if entry["parent"] in accounts_removed else
                " (list it in accounts)"))
        missing = sorted(set(entry.get("qos") or ()) - qos_after)
        if missing:
            raise SlurmInputError("%s.qos: unknown QoS %s (list it in qos)" % (entry["where"], ", ".join(missing)))
        default = entry.get("default_qos")
        if default is not None:
            allowed = entry.get("qos") if "qos" in entry["given"] else state.accounts.get(name, {}).get("qos", frozenset())
            if default not in qos_after:
                raise SlurmInputError("%s.default_qos: unknown QoS %s" % (entry["where"], default))
            if default not in allowed:
                raise SlurmInputError("%s.default_qos: %s is not in the account's qos list (%s)" % (
                    entry["where"], default, ", ".join(sorted(allowed)) or "empty"))
    # a parent cycle: walk up from every account
    for name in sorted(n for n, e in want_accounts.items() if e["state"] == "present"):
        seen = [name]
        parent = parents.get(name)
        while parent and parent != "root":
            if parent in seen:
                raise SlurmInputError("accounts[%s].parent: the parents form a cycle (%s)" % (
                    name, " -> ".join(seen + [parent])))
            seen.append(parent)
            parent = parents.get(parent)
    for name in sorted(accounts_removed):
        children = sorted(n for n, account in state.accounts.items() if account.get("parent") == name
                          and n not in accounts_removed and parents.get(n) == name)
        if children:
            raise SlurmInputError(
                "accounts[%s]: removing it would remove its sub-account(s) %s with it: list them as absent "
                "or give them another parent" % (name, ", ".join(children)))
    for name, entry in sorted(want_users.items()):
        for account, _partition in sorted(entry.get("associations", ())):
            if account not in accounts_after:
                raise SlurmInputError("%s: account %s does not exist%s" % (
                    entry["where"], account, " after this change" if account in accounts_removed else
                    " (list it in accounts)"))


def blocking_jobs(plan_, jobs):
    """Active jobs that the planned removals would leave without their account, user or QoS."""
    removed = plan_.removals
    blocked = []
    for job in jobs:
        if job["state"] in FINISHED_JOB_STATES:
            continue
        user, account, partition, qos = job["user"], job["account"], job["partition"], job["qos"]
        if (account in removed["accounts"] or user in removed["users"] or qos in removed["qos"]
                or any(user == u and account == a and (not p or p == partition)
                       for u, a, p in removed["associations"])):
            blocked.append(job)
    return blocked


_JOB_FIELDS = ("job_id", "state", "user", "account", "partition", "qos")


def read_jobs(runner):
    """Every job Slurm still knows, with the fields removals are checked against (one squeue call)."""
    output = runner.run("squeue", ["--noheader", "--array", "--states=all", "--format=%i|%T|%u|%a|%P|%q"])
    jobs = []
    for values in _rows(output, len(_JOB_FIELDS)):
        job = dict(zip(_JOB_FIELDS, [value.strip().lower() for value in values]))
        jobs.append(job)
    return jobs


# ----------------------------------------------------------------------- the collection's variables
# TRES every slurmdbd counts (`sacctmgr show tres` of a new 22.05/24.11 database); AccountingStorageTRES
# in slurm.conf adds others (gres/gpu, license/..., ...).
BASE_TRES = ("cpu", "mem", "energy", "node", "billing", "fs/disk", "vmem", "pages")


def collection_input(qos, accounts, users, default_account):
    """slurm_accounting's qos/accounts/users from the config role's config_qos, config_accounts and
    config_users: every user gets its `account` (else `default_account`) as default account, plus an
    association with each of its `accounts`; `default_account` is added to the accounts when a user
    names it (or names no account) and config_accounts does not list it."""
    default_account = str(default_account)
    module_users = []
    for user in users or []:
        entry = dict(name=user["name"], default_account=user.get("account") or default_account,
                     associations=[dict(account=account) for account in user.get("accounts") or []])
        if user.get("admin_level") is not None:
            entry["admin_level"] = user["admin_level"]
        module_users.append(entry)
    module_accounts = [dict(account) for account in accounts or []]
    listed = set(str(account.get("name") or "").lower() for account in module_accounts)
    relied_on = any(default_account.lower() in [str(account).lower() for account in
                                                [entry["default_account"]] + [a["account"] for a in entry["associations"]]]
                    for entry in module_users)
    if default_account.lower() not in listed and relied_on:
        module_accounts.append(dict(name=default_account,
                                    description="default account of config_users"))
    return dict(qos=[dict(entry) for entry in qos or []], accounts=module_accounts, users=module_users)


class FreshState:
    """The state of a new accounting database (what slurmctld's first registration creates), to check
    the collection's variables before anything exists: every reference must then be to an entity the
    variables list, or to Slurm's own root account and normal QoS."""

    def __init__(self, cluster, extra_tres=()):
        self.cluster = cluster.lower()
        self.qos = dict(normal=dict(description="normal qos default", priority=0, preempt=frozenset(),
                                    preempt_mode="cluster", grp_tres={}, max_tres_per_user={}, max_tres_per_job={},
                                    max_jobs_per_user=None, max_submit_jobs_per_user=None, max_wall=None,
                                    flags=frozenset()))
        self.accounts = dict(root=dict(description="default root account", organization="root", parent=None,
                                       fairshare="1", qos=frozenset(["normal"]), default_qos=None))
        self.users = dict(root=dict(default_account="root", admin_level="administrator"))
        self.associations = set([("root", "root", "")])
        self.tres = set(BASE_TRES) | set(name.strip().lower() for name in extra_tres if name.strip())

    def user_associations(self, user):
        return set((account, partition) for name, account, partition in self.associations if name == user)
