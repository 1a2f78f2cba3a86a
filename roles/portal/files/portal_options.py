"""The options of a portal user's notebook job: the form the hub shows and the one check of what comes back.

The administrator's choices and bounds come from portal.json (the role's portal_job_options, checked by the
preflight against Slurm's partitions):

    {"partitions": ["compute", "gpu"],              # offered, the first one preselected
     "cpus": {"default": 1, "max": 4},
     "memory_mb": {"default": 1024, "max": 4096},
     "time_minutes": {"default": 60, "max": 480}}

What a user sends is checked here, on the hub, every time a server starts: from the form (lists of strings)
and from the REST API (POST /hub/api/users/NAME/server, whose JSON body JupyterHub hands to the spawner
as it is). A value outside its bound, an unknown partition or an unknown field is refused with a message
naming the field; nothing of it reaches the batch script unchecked.
"""

from __future__ import annotations

import html

FIELDS = ("partition", "cpus", "memory_mb", "time_minutes")


class JobOptionError(ValueError):
    """A user's option that the administrator's bounds do not allow (the message names the field)."""


def _single(value, field):
    """A form sends each field as a list of strings; the REST API sends a scalar."""
    if isinstance(value, list):
        if len(value) != 1:
            raise JobOptionError("%s: one value expected, got %d" % (field, len(value)))
        value = value[0]
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise JobOptionError("%s: a number or a name expected, got %r" % (field, value))
    return str(value).strip()


def _bounded(value, field, bounds, unit):
    text = _single(value, field)
    if not text.isdigit():
        raise JobOptionError("%s: a whole number of %s expected, got %r" % (field, unit, text))
    number = int(text)
    if not 1 <= number <= bounds["max"]:
        raise JobOptionError("%s: %d %s is outside 1 to %d, the portal's bound" % (field, number, unit, bounds["max"]))
    return number


def chosen(options, sent):
    """What a user sent, checked against the bounds: {'partition', 'cpus', 'memory_mb', 'time_minutes'}, plain
    values (the spawner keeps them as its user_options; checking them again gives them back unchanged). A field
    not sent takes its default."""
    unknown = sorted(set(sent) - set(FIELDS))
    if unknown:
        raise JobOptionError("unknown option(s) %s; the portal offers %s" % (", ".join(unknown), ", ".join(FIELDS)))
    partition = _single(sent.get("partition", options["partitions"][0]), "partition")
    if partition not in options["partitions"]:
        raise JobOptionError("partition: %r is not offered (%s)" % (partition, ", ".join(options["partitions"])))
    return {"partition": partition,
            "cpus": _bounded(sent.get("cpus", options["cpus"]["default"]), "cpus", options["cpus"], "CPUs"),
            "memory_mb": _bounded(sent.get("memory_mb", options["memory_mb"]["default"]), "memory_mb",
                                  options["memory_mb"], "MB"),
            "time_minutes": _bounded(sent.get("time_minutes", options["time_minutes"]["default"]), "time_minutes",
                                     options["time_minutes"], "minutes")}


def job_options(options, sent):
    """The notebook job's request from what a user sent: {'partition', 'nprocs', 'memory', 'runtime'}, the
    keys batchspawner substitutes into the batch script."""
    checked = chosen(options, sent)
    return {"partition": checked["partition"], "nprocs": str(checked["cpus"]), "memory": "%dM" % checked["memory_mb"],
            "runtime": "%02d:%02d:00" % divmod(checked["time_minutes"], 60)}


def form_html(options):
    """The options form: a partition to choose and three numbers, each with its bound shown (the browser's
    own checks are a convenience; job_options is the check)."""
    partitions = "".join('<option value="%s"%s>%s</option>'
                         % (html.escape(name, quote=True), " selected" if index == 0 else "", html.escape(name))
                         for index, name in enumerate(options["partitions"]))
    rows = ['<div class="form-group"><label for="partition">Partition</label>'
            '<select class="form-control" name="partition" id="partition">%s</select></div>' % partitions]
    for field, label in (("cpus", "CPUs"), ("memory_mb", "Memory (MB)"), ("time_minutes", "Time limit (minutes)")):
        bounds = options[field]
        rows.append('<div class="form-group"><label for="{f}">{label} (1 to {max})</label>'
                    '<input class="form-control" type="number" name="{f}" id="{f}" min="1" max="{max}" step="1" '
                    'value="{default}" required></div>'.format(f=field, label=label, max=int(bounds["max"]),
                                                               default=int(bounds["default"])))
    return "\n".join(rows)
