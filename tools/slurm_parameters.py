# Copyright: (c) 2026, hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write plugins/plugin_utils/slurm_parameters.json: the parameters of slurm.conf, cgroup.conf, gres.conf and
slurmdbd.conf of each Slurm major this collection knows, from that release's own sources (the newest tag of
each major in a clone of SchedMD's repository).

For each file and major: every key the release's parser accepts (its s_p_options_t table, with the parser's
value type: a uint16 key takes 0-65535 or UNLIMITED/INFINITE, a boolean yes/no/true/false/up/down/1/0...),
whether the parser only warns that the key is defunct, whether the release's man page documents it, and what
the man page's paragraph of the key states about its value (a maximum: "may not exceed 65533"; a minimum:
"must be larger than 0", "between 5 seconds and 65533 seconds"), and the minimums the parser's own checks
state ("MinJobAge must be at least 2", "MaxJobCount=0, No jobs permitted"). Plugin names are not listed: the man pages do not name every plugin a
release builds (24.11's TaskPlugin paragraph has no task/none), so only the image can say which exist.

    python3 tools/slurm_parameters.py /path/to/slurm.git > plugins/plugin_utils/slurm_parameters.json

    python3 tools/slurm_parameters.py --markdown plugins/plugin_utils/slurm_parameters.json > docs/slurm-parameters-table.md

(`make slurm-parameters SLURM_REPO=...` runs both.) Nothing here runs at deploy time: the collection reads the
JSON (plugins/plugin_utils/_slurm_parameters.py).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

# the majors and the newest tag of each that the table was written from: the supported majors (plugins/filter/
# slurm_versions.py, SUPPORTED_MAJORS) and 22.05, the host Slurm of the T2 tests and of Debian 12 bare metal
MAJORS = ("22.05", "24.11", "25.05", "25.11", "26.05")

# file: (source file candidates, a key that is in the parser table of that file, man page)
FILES = {
    "slurm.conf": (("src/common/read_config.c",), "SlurmctldHost", "doc/man/man5/slurm.conf.5"),
    "cgroup.conf": (("src/interfaces/cgroup.c", "src/common/cgroup.c"), "CgroupPlugin", "doc/man/man5/cgroup.conf.5"),
    "gres.conf": (("src/interfaces/gres.c", "src/common/gres.c"), "MultipleFiles", "doc/man/man5/gres.conf.5"),
    "slurmdbd.conf": (("src/slurmdbd/read_config.c",), "ArchiveDir", "doc/man/man5/slurmdbd.conf.5"),
}
# keys of slurm.conf's parser table that start lines of their own, written from config_nodes, config_partitions
# and config_nodesets (never from an override dict, whose rules refuse them)
LINE_KEYS = {"slurm.conf": {"NodeName", "PartitionName", "NodeSet"}}
_TYPES = {"S_P_STRING": "string", "S_P_PLAIN_STRING": "string", "S_P_POINTER": "string", "S_P_ARRAY": "string",
          "S_P_LONG": "long", "S_P_UINT16": "uint16", "S_P_UINT32": "uint32", "S_P_UINT64": "uint64",
          "S_P_BOOLEAN": "boolean", "S_P_FLOAT": "float", "S_P_DOUBLE": "float", "S_P_LONG_DOUBLE": "float",
          "S_P_LINE": "string", "S_P_EXPLINE": "string", "S_P_IGNORE": "ignored"}
_ENTRY = re.compile(r'\{\s*(?:\.key\s*=\s*)?"([A-Za-z][A-Za-z0-9]*)"\s*,\s*(?:\.type\s*=\s*)?(S_P_[A-Z_0-9]+)'
                    r'(?:\s*,\s*(?:\.handler\s*=\s*)?([A-Za-z_][A-Za-z0-9_]*))?')
# a table ends at its {NULL} entry (written "{NULL}\n};" or "{NULL} };")
_BLOCK = re.compile(r"s_p_options_t\s+\w+\s*\[\s*\]\s*=\s*\{(.*?)\{\s*NULL\s*\}", re.S)


def _git_show(repo, tag, path):
    done = subprocess.run(["git", "-C", repo, "show", "%s:%s" % (tag, path)], capture_output=True, text=True,
                          check=False)
    return done.stdout if done.returncode == 0 else None


def newest_tags(repo):
    tags = subprocess.run(["git", "-C", repo, "tag", "--list", "slurm-*"], capture_output=True, text=True,
                          check=True).stdout.split()
    newest = {}
    for tag in tags:
        found = re.fullmatch(r"slurm-(\d\d)-(\d\d)-(\d+)-(\d+)", tag)
        if not found:
            continue
        major = "%s.%s" % found.group(1, 2)
        if major in MAJORS:
            key = (int(found.group(3)), int(found.group(4)))
            if major not in newest or key > newest[major][0]:
                newest[major] = (key, tag)
    missing = [major for major in MAJORS if major not in newest]
    if missing:
        raise SystemExit("no tag of Slurm %s in %s" % (", ".join(missing), repo))
    return {major: newest[major][1] for major in MAJORS}


def parser_keys(source, marker):
    """{key: (type, handler)} of the s_p_options_t table that holds the marker key."""
    for block in _BLOCK.findall(source):
        entries = {key: (kind, handler) for key, kind, handler in _ENTRY.findall(block)}
        if marker in entries:
            return entries
    raise SystemExit("no parser table with %s" % marker)


def _plain(roff):
    text = re.sub(r"\\f[BIRP]|\\f\(..", "", roff)
    text = text.replace("\\-", "-").replace("\\(em", "-").replace("\\e", "\\").replace("\\&", "")
    text = re.sub(r"^\.(?:TP|IP|RS|RE|br|PP|LP|P|nf|fi|sp|na|ad|in)\b.*$", "", text, flags=re.M)
    text = re.sub(r"^\.[A-Z]{1,2} ?", "", text, flags=re.M)
    return re.sub(r"\s+", " ", text).strip()


def man_paragraphs(man, keys):
    """{key: paragraph text} of the keys the man page documents (a .TP item whose tag is the key)."""
    paragraphs, current, lines = {}, None, []
    # (a man page may spell a key in another case: DefCpuPerGPU for the parser's DefCPUPerGPU)
    by_lower = {key.lower(): key for key in keys}
    tag = re.compile(r'^\\fB([A-Za-z][A-Za-z0-9]*)\\fR')
    man_lines = man.splitlines()
    for index, line in enumerate(man_lines):
        found = tag.match(line)
        if found and index > 0 and man_lines[index - 1].startswith(".TP") and found.group(1).lower() in by_lower:
            if current:
                paragraphs.setdefault(current, _plain("\n".join(lines)))
            current, lines = by_lower[found.group(1).lower()], []
            continue
        if current:
            if line.startswith(".SH"):
                paragraphs.setdefault(current, _plain("\n".join(lines)))
                current, lines = None, []
            else:
                lines.append(line)
    if current:
        paragraphs.setdefault(current, _plain("\n".join(lines)))
    return paragraphs


_NUMBER = r"(\d+)"


def bounds(text):
    """The minimum and maximum a man page paragraph states for its key's value (None where it states none)."""
    low = high = None
    found = re.search(r"(?:value )?(?:must|should) be (?:between|in the range(?: of)?) " + _NUMBER
                      + r"(?: \w+)? (?:and|to) " + _NUMBER, text, re.I)
    if found:
        low, high = int(found.group(1)), int(found.group(2))
    found = re.search(r"may not exceed " + _NUMBER, text, re.I) or re.search(
        r"(?:maximum|max) (?:value|supported value) (?:is|of) " + _NUMBER, text, re.I)
    if found:
        high = int(found.group(1)) if high is None else min(high, int(found.group(1)))
    found = re.search(r"(?:value )?must be (?:larger|greater) than (?:0|zero)|must be a positive (?:integer|number)"
                      r"|must be non-?zero", text, re.I)
    if found:
        low = 1 if low is None else max(low, 1)
    return low, high


# bounds that read_config.c checks against a named constant (the constant's value is read from the release)
_SOURCE_CONSTANT_BOUNDS = {"MaxDBDMsgs": ("min", "DEFAULT_MAX_DBD_MSGS"), "PropagatePrioProcess": ("max", "PROP_PRIO_NICER"),
                           "MaxJobId": ("max", "MAX_JOB_ID"), "FirstJobId": ("max", "MAX_JOB_ID")}


def _constant(repo, tag, name):
    found = subprocess.run(["git", "-C", repo, "grep", "-h", "-E", r"#define %s\b" % name, tag, "--", "src", "slurm"],
                           capture_output=True, text=True, check=False).stdout
    value = re.search(r"#define %s\s+\(?(0x[0-9A-Fa-f]+|\d+)" % name, found)
    if not value:
        raise SystemExit("no #define %s in %s" % (name, tag))
    return int(value.group(1), 0)


def source_bounds(repo, tag, source):
    """{key: {"min"/"max": n}} that the parser's own checks state ("MinJobAge must be at least 2", "FirstJobId
    cannot be zero", "MaxJobCount=%u, No jobs permitted", "MaxDBDMsgs value (%u) needs to be greater than
    DEFAULT_MAX_DBD_MSGS"): values the parser table accepts but the daemons refuse or correct."""
    found = {key: {"min": int(low)} for key, low in re.findall(r'"(\w+) must be at least (\d+)', source)}
    found.update({key: {"min": 1} for key in re.findall(r'"(\w+) cannot be zero"', source)})
    found.update({key: {"min": 1} for key in re.findall(r'"(\w+)=%u, No \w+ permitted"', source)})
    for key, (side, constant) in _SOURCE_CONSTANT_BOUNDS.items():
        if '"%s"' % key in source:
            found.setdefault(key, {})[side] = _constant(repo, tag, constant)
    return found


def _grouped(by_major):
    variants = []
    for major, entry in by_major.items():
        same = next((variant for variant in variants
                     if {k: v for k, v in variant.items() if k != "majors"} == entry), None)
        if same:
            same["majors"].append(major)
        else:
            variants.append(dict(entry, majors=[major]))
    return variants


def table(repo):
    tags = newest_tags(repo)
    files = {}
    for name, (candidates, marker, man_path) in FILES.items():
        keys = {}
        for major, tag in tags.items():
            source = next(filter(None, (_git_show(repo, tag, path) for path in candidates)), None)
            if source is None:
                raise SystemExit("no parser source of %s in %s" % (name, tag))
            parsed = parser_keys(source, marker)
            man = _git_show(repo, tag, man_path) or ""
            paragraphs = man_paragraphs(man, set(parsed))
            checked = source_bounds(repo, tag, source) if name == "slurm.conf" else {}
            for key, (kind, handler) in parsed.items():
                if key in LINE_KEYS.get(name, ()):
                    continue
                text = paragraphs.get(key, "")
                low, high = bounds(text)
                if "min" in checked.get(key, {}):
                    low = max(low or 0, checked[key]["min"])
                if "max" in checked.get(key, {}):
                    high = min(high if high is not None else checked[key]["max"], checked[key]["max"])
                entry = {"type": _TYPES.get(kind, "string")}
                if handler == "_defunct_option" or entry["type"] == "ignored":
                    entry["defunct"] = True
                if not text:
                    entry["undocumented"] = True
                if low is not None:
                    entry["min"] = low
                if high is not None:
                    entry["max"] = high
                keys.setdefault(key, {})[major] = entry
        # {key: [{majors: [...], type, ...}]}: the majors with the same entry together
        files[name] = {key: _grouped(entries) for key, entries in keys.items()}
    return {"comment": "written by tools/slurm_parameters.py from SchedMD's tags below; do not edit",
            "tags": tags, "files": files}


def markdown(path):
    """The table as Markdown (docs/slurm-parameters-table.md), from the JSON it was written to."""
    with open(path, encoding="utf-8") as handle:
        written = json.load(handle)
    ranges = {"uint16": (0, 2 ** 16 - 1), "uint32": (0, 2 ** 32 - 1), "uint64": (0, 2 ** 64 - 1)}
    lines = ["# Slurm's parameters per major", "",
             "Written by `make slurm-parameters` (tools/slurm_parameters.py) from %s; what each column means and how"
             " the collection uses it: [slurm-parameters.md](slurm-parameters.md). Type `uint16` is an integer"
             " 0-65535 (UNLIMITED and INFINITE are its largest value), `boolean` yes/no/true/false/up/down/1/0,"
             " `string` anything the file's grammar allows." % ", ".join("`%s`" % tag for tag in written["tags"].values()), ""]
    for name, keys in sorted(written["files"].items()):
        lines += ["## %s" % name, "", "| Parameter | Majors | Type | Range | Notes |", "| --- | --- | --- | --- | --- |"]
        for key in sorted(keys, key=str.lower):
            for variant in keys[key]:
                low, high = ranges.get(variant["type"], (None, None))
                low, high = variant.get("min", low), variant.get("max", high)
                bounds = "%s-%s" % (low, high) if low is not None else ""
                flags = (("defunct", "defunct (ignored, an error logged)"), ("undocumented", "not in the man page"))
                notes = ", ".join(note for flag, note in flags if variant.get(flag))
                lines.append("| %s | %s | %s | %s | %s |" % (key, ", ".join(variant["majors"]), variant["type"], bounds, notes))
        lines.append("")
    return "\n".join(lines)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--markdown":
        sys.stdout.write(markdown(sys.argv[2]))
        return
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    # one line per key: a change of the table reads as the keys it changes
    written = table(sys.argv[1])
    lines = ["{", ' "comment": %s,' % json.dumps(written["comment"]), ' "tags": %s,' % json.dumps(written["tags"]),
             ' "files": {']
    for index, (name, keys) in enumerate(sorted(written["files"].items())):
        lines.append('  %s: {' % json.dumps(name))
        rows = ['   %s: %s' % (json.dumps(key), json.dumps(keys[key], sort_keys=True)) for key in sorted(keys)]
        lines.append(",\n".join(rows))
        lines.append("  }" + ("," if index < len(written["files"]) - 1 else ""))
    lines += [" }", "}"]
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
