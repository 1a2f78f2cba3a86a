# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Slurm hostlists for hpc.slurm_k8s, expanded by Slurm's own parser. Private to hpc.slurm_k8s."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.hpc.slurm_k8s.plugins.module_utils._slurm_runner import SlurmInputError

_SENTINEL = "hpc-slurm-k8s-hostlist-end-%d"


def _natural_key(name):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def sort_names(names):
    return sorted(set(names), key=_natural_key)


def expand(runner, expressions):
    """Expand hostlist expressions with Slurm's own parser, keeping which expression gave which names.

    All expressions go to ONE `scontrol show hostnames` call, separated by sentinel names that the
    hostlist parser passes through unchanged. Returns a list of name lists, one per expression.
    """
    for expression in expressions:
        if not expression or expression.count("[") != expression.count("]") or re.search(r"\s", expression):
            raise SlurmInputError("invalid hostlist expression %r: expected node names or Slurm "
                                  "hostlists such as slurmd-[0-15]" % expression)
    joined = []
    for index, expression in enumerate(expressions):
        joined += [expression, _SENTINEL % index]
    groups, current = [], []
    for name in runner.expand_hostlists(joined).split():
        if name == _SENTINEL % len(groups):
            groups.append(current)
            current = []
        else:
            current.append(name)
    if len(groups) != len(expressions):
        raise SlurmInputError("could not expand the hostlist expressions %s" % ", ".join(expressions))
    return groups
