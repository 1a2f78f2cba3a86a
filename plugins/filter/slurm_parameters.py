# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Slurm configuration overrides judged against the parameters of the Slurm majors the images run.

hpc.slurm_k8s.check_inputs judges every override against all supported majors before anything changes (a key
must be a parameter of one of them); the slurmctld role's version check, which reads the images' Slurm
versions, then asks this filter about exactly those majors: a key one of them lacks, or a value one of them
refuses, is named with the major (plugins/plugin_utils/_slurm_parameters.py).

    {'config_slurm_conf': {...}, 'slurmdbd_conf': {...}, ...} | hpc.slurm_k8s.slurm_parameter_problems(['24.11'])
A list of lines, one per problem (empty: every major accepts every override). Majors newer than the table
knows (slurmctld_allow_newer_major) are left to their daemons.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.hpc.slurm_k8s.plugins.plugin_utils import _inputs, _slurm_parameters


def slurm_parameter_problems(variables, majors):
    if not isinstance(variables, Mapping):
        raise AnsibleFilterError("slurm_parameter_problems: expected a dict of variables, got %r" % (variables,))
    known = [major for major in majors if major in _slurm_parameters.MAJORS]
    if not known:
        return []
    return [str(problem) for problem in _inputs.slurm_parameter_problems(dict(variables), known, strict=True)]


class FilterModule(object):
    def filters(self):
        return {"slurm_parameter_problems": slurm_parameter_problems}
