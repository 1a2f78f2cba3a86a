# -*- coding: utf-8 -*-
# Copyright: (c) 2026, hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The parameters Slurm accepts in slurm.conf, cgroup.conf, gres.conf and slurmdbd.conf, per major release,
and the check of one override value against them (controller side).

The table (slurm_parameters.json) is written by tools/slurm_parameters.py from each release's own sources:
the parser's table of keys with their value types (src/common/read_config.c and the others: a key that is
not there stops the daemon at "Parsing error at unrecognized key"), the man page's bounds of the value and the
bounds the parser's own checks state. ``problems(file, key, value, majors, strict)`` says what is wrong with one
value for the given majors: an unknown key (with a did-you-mean), a key that a major lacks or ignores, a key that
Slurm replaced (with the replacement), or a value outside its type or bounds (with what Slurm accepts).
"""

from __future__ import annotations

import difflib
import json
import os
import re

from ansible_collections.hpc.slurm_k8s.plugins.filter.slurm_conf import slurm_conf_value

with open(os.path.join(os.path.dirname(__file__), "slurm_parameters.json"), encoding="utf-8") as _table:
    _TABLE = json.load(_table)

MAJORS = tuple(_TABLE["tags"])
# {file: {lower-case key: (key, [variant, ...])}}: Slurm reads keys case-insensitively
_KEYS = {name: {key.lower(): (key, variants) for key, variants in keys.items()}
         for name, keys in _TABLE["files"].items()}

# Keys that the parser still reads for old files but that a newer key replaces: (the first major in which the
# replacement exists, None for all of the table's, the replacement), from the parsers of these releases
# (src/common/read_config.c, src/slurmdbd/read_config.c, src/interfaces/gres.c).
REPLACED = {
    "slurm.conf": {
        "ControlMachine": (None, "SlurmctldHost (ignored once SlurmctldHost is set, which the collection does)"),
        "ControlAddr": (None, "SlurmctldHost=<name>(<address>) (ignored once SlurmctldHost is set)"),
        "BackupController": (None, "a second SlurmctldHost line (ignored once SlurmctldHost is set)"),
        "BackupAddr": (None, "a second SlurmctldHost line (ignored once SlurmctldHost is set)"),
        "CryptoType": (None, "CredType (CryptoType is read only when CredType is not set, and the collection sets it)"),
        "AcctGatherInfinibandType": (None, "AcctGatherInterconnectType"),
        "KeepAliveTime": (None, "CommunicationParameters=keepalivetime=<seconds>"),
        "AccountingStoreJobComment": (None, "AccountingStoreFlags=job_comment"),
        "SallocDefaultCommand": (None, "LaunchParameters=use_interactive_step"),
        "FastSchedule": (None, "nothing: Slurm ignores it (SlurmdParameters=config_overrides replaces FastSchedule=2)"),
        # 25.11 warns "JobContainerType has been replaced with NamespaceType"; 24.11 and 25.05 have no NamespaceType
        "JobContainerType": ("25.11", "NamespaceType"),
    },
    "gres.conf": {"CPUs": (None, "Cores")},
    "slurmdbd.conf": dict({"JobPurge": (None, "PurgeJobAfter"), "StepPurge": (None, "PurgeStepAfter")}, **{
        "Purge%sMonths" % kind: (None, "Purge%sAfter (e.g. 12months)" % kind)
        for kind in ("Event", "Job", "Step", "Suspend", "TXN", "Usage")}),
}
# the bounds of the parser's integer types; UNLIMITED and INFINITE are the type's largest value to the parser
_TYPE_RANGE = {"uint16": (0, 2 ** 16 - 1), "uint32": (0, 2 ** 32 - 1), "uint64": (0, 2 ** 64 - 1),
               "long": (-2 ** 63, 2 ** 63 - 1)}
_INFINITE = {"uint16": 2 ** 16 - 1, "uint32": 2 ** 32 - 1, "uint64": 2 ** 64 - 1, "long": 2 ** 32 - 1}
_BOOLEANS = ("yes", "no", "true", "false", "up", "down", "1", "0")


def span(majors):
    """'24.11' or '24.11 to 26.05' or '22.05, 24.11 and 26.05' (in the table's order)."""
    majors = [major for major in MAJORS if major in majors]
    if not majors:
        return "none"
    indexes = [MAJORS.index(major) for major in majors]
    if len(majors) > 2 and indexes == list(range(indexes[0], indexes[-1] + 1)):
        return "%s to %s" % (majors[0], majors[-1])
    return majors[0] if len(majors) == 1 else "%s and %s" % (", ".join(majors[:-1]), majors[-1])


def _integer(text, kind):
    """The number Slurm's parser reads (strtol/strtoul with base 0: 0x1f is hex, 017 octal), or None."""
    if text.upper() in ("UNLIMITED", "INFINITE"):
        return _INFINITE[kind]
    if not re.fullmatch(r"[+-]?(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)", text):
        return None
    return int(text, 0) if not re.fullmatch(r"[+-]?0[0-7]+", text) else int(text.replace("0", "0o", 1), 0)


def _type_problem(variant, value):
    """What is wrong with the value for one variant of a key (None: Slurm accepts it)."""
    kind = variant["type"]
    text = slurm_conf_value(value)
    if kind == "boolean":
        if text.lower() not in _BOOLEANS:
            return "a boolean (true/false, or YES/NO)"
        return None
    if kind == "float":
        try:
            float(text)
        except ValueError:
            return "a number"
        return None
    if kind not in _TYPE_RANGE:
        return None
    number = None if isinstance(value, (bool, float, list, tuple)) else _integer(text, kind)
    if kind != "long" and text.startswith("-"):
        number = None  # the unsigned types' parser refuses any leading '-', "-0" too
    low, high = _TYPE_RANGE[kind]
    low = max(low, variant.get("min", low))
    high = min(high, variant.get("max", high))
    wanted = "an integer from %d to %d" % (low, high)
    if number is None or not low <= number <= high:
        if text.upper() in ("UNLIMITED", "INFINITE") and high < _TYPE_RANGE[kind][1]:
            wanted += " (to Slurm %s is %d)" % (text.upper(), number)
        return wanted
    return None


def suggestion(file, key):
    """' (did you mean X?)' for a key close to one of the file's keys in any major, else ''."""
    names = {name.lower(): name for name, _variants in _KEYS[file].values()}
    close = difflib.get_close_matches(key.lower(), list(names), n=1, cutoff=0.75)
    return "; did you mean %s?" % names[close[0]] if close else ""


def known(file, key):
    """Whether any major of the table has the key."""
    return str(key).lower() in _KEYS[file]


def has(file, key, major):
    """Whether Slurm ``major`` has the key in ``file``."""
    found = _KEYS[file].get(str(key).lower())
    return found is not None and any(major in variant["majors"] for variant in found[1])


def problems(file, key, value, majors, strict=True):
    """A list of (part, text): part 'key' for a problem of the key, 'value' for one of its value. ``strict``: the
    cluster runs each of ``majors`` (the images' majors), so what any of them refuses is a problem; else the
    cluster runs one of them, not known yet (the supported majors, before the images are read), so only what
    every one of them that has the key refuses is. None (a key removed from the file) is never a problem."""
    found = _KEYS[file].get(str(key).lower())
    majors = [major for major in MAJORS if major in majors]
    if found is None:
        return [("key", "is not a %s parameter of Slurm %s%s" % (file, span(MAJORS), suggestion(file, key)))]
    name, variants = found
    if value is None:
        return []
    by_major = {major: variant for variant in variants for major in variant["majors"]}
    having = [major for major in majors if major in by_major]
    if not having:
        return [("key", "is not a %s parameter of Slurm %s (only of %s)" % (
            file, span(majors), span([major for major in MAJORS if major in by_major])))]
    result = []
    absent = [major for major in majors if major not in by_major]
    if strict and absent:
        result.append(("key", "is not a %s parameter of Slurm %s (it is of %s)" % (file, span(absent), span(having))))

    def judged(refusing):
        # the majors whose verdict counts: any refusing one when strict, else only when all of them refuse
        return refusing if strict or refusing == having else []

    since, replacement = REPLACED.get(file, {}).get(name, (None, None))
    replaced = judged([major for major in having if since is None or MAJORS.index(major) >= MAJORS.index(since)]
                      if replacement else [])
    if replaced:
        return result + [("key", "is an old name that Slurm %s %s only for old files: use %s" % (
            span(replaced), "keeps" if len(replaced) == 1 else "keep", replacement))]
    defunct = judged([major for major in having if by_major[major].get("defunct")])
    if defunct:
        return result + [("key", "is defunct in Slurm %s: its daemons ignore it and log an error; remove it"
                          % span(defunct))]
    wrong = {}
    for major in having:
        rule = _type_problem(by_major[major], value)
        if rule:
            wrong.setdefault(rule, []).append(major)
    if judged(sorted({major for where in wrong.values() for major in where}, key=MAJORS.index)):
        for rule, where in wrong.items():
            result.append(("value", "Slurm %s %s %s here, got %r" % (
                span(where), "accepts" if len(where) == 1 else "accept", rule, value)))
    return result


# MaxJobId when slurm.conf sets none (DEFAULT_MAX_JOB_ID of src/common/read_config.h)
_DEFAULT_MAX_JOB_ID = 0x03FF0000


def slurm_conf_relations(conf):
    """(keys, text) of each rule between slurm.conf keys that read_config.c checks and stops at (the same in
    22.05 to 26.05); ``conf`` is the whole key: value dict, None values left out."""
    lowered = {str(key).lower(): value for key, value in conf.items() if value is not None}
    found = []

    def number(key, default):
        text = slurm_conf_value(lowered.get(key.lower(), default))
        value = _integer(text, "uint32")
        return value if value is not None and not isinstance(lowered.get(key.lower()), bool) else None

    first, last = number("FirstJobId", 1), number("MaxJobId", _DEFAULT_MAX_JOB_ID)
    if first is not None and last is not None and first > last:
        found.append((("FirstJobId", "MaxJobId"), "FirstJobId (%d) must not be above MaxJobId (%d%s): Slurm stops at"
                      " 'FirstJobId > MaxJobId'" % (first, last, "" if "maxjobid" in lowered else ", Slurm's default")))
    if number("SlurmSchedLogLevel", 0) and "slurmschedlogfile" not in lowered:
        found.append((("SlurmSchedLogLevel", "SlurmSchedLogFile"), "SlurmSchedLogLevel needs SlurmSchedLogFile: Slurm stops at 'SlurmSchedLogLevel requires "
                      "SlurmSchedLogFile value'"))
    if "maxnodecount" in lowered and slurm_conf_value(lowered.get("selecttype", "")) != "select/cons_tres":
        found.append((("MaxNodeCount", "SelectType"), "MaxNodeCount needs SelectType=select/cons_tres: Slurm stops at 'MaxNodeCount only "
                      "compatible with cons_tres'"))
    return found
