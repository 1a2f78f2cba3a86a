# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How a value and a line of slurm.conf are written: the one place for it (slurm.conf.j2 and the
power-save role's lines both use these filters).

    true / false      YES / NO (a Python/Jinja boolean would print True, which Slurm does not read as yes)
    a list            comma-separated (DebugFlags=Backfill,Power)
    anything else     as text
A line is `First=value Key=value ...` in the order given, keys whose value is None left out.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError


def slurm_conf_value(value):
    if value is True:
        return "YES"
    if value is False:
        return "NO"
    if isinstance(value, (list, tuple)):
        return ",".join(slurm_conf_value(item) for item in value)
    return "%s" % (value,)


def slurm_conf_line(item, first):
    """One NodeName/NodeSet/PartitionName line from a dict whose `first` key names it."""
    if not isinstance(item, Mapping) or first not in item:
        raise AnsibleFilterError("slurm_conf_line: expected a dict with the key %s, got %r" % (first, item))
    return " ".join(["%s=%s" % (first, slurm_conf_value(item[first]))]
                    + ["%s=%s" % (key, slurm_conf_value(value)) for key, value in item.items()
                       if key != first and value is not None])


class FilterModule(object):
    def filters(self):
        return {"slurm_conf_value": slurm_conf_value, "slurm_conf_line": slurm_conf_line}
