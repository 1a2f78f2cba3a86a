#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done by the action plugin of the same name (plugins/action/check_inputs.py), on the
# controller; this file holds its documentation.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: check_inputs
short_description: Check every variable of the collection's roles before anything is changed
version_added: 0.1.0
attributes:
  check_mode:
    support: full
    description: Only reads; behaves the same in check mode.
  diff_mode:
    support: none
    description: Only reads; nothing to diff.
description:
  - Runs on the controller and changes nothing. Every playbook of the collection runs it first, and
    the C(hpc.slurm_k8s.cluster) role's preflight runs it for plays that use the roles directly.
  - For every role it reads the role's C(meta/argument_specs.yml) (types and choices, one short message
    per variable instead of the argument spec dump) and then the collection's grammar rules
    (C(plugins/plugin_utils/_inputs.py)).
  - Every value that ends up in a file the collection writes (slurm.conf, cgroup.conf, slurmdbd.conf, the
    users file, authorized_keys) or in a manifest (names, labels, quantities) is checked against that
    file's grammar, every number against a range the daemons accept, and a few rules across variables
    (for example C(slurmd_replicas) within C(MaxNodeCount)).
  - Values come from the play's variables, else from the role defaults.
  - A variable that starts with a role prefix (C(cluster_), C(slurmd_), ...) but is no variable of any
    role fails with a suggestion (C(slurmd_replica) -> C(slurmd_replicas)), unless
    C(cluster_unknown_variables=warn).
  - All problems are listed at once, one rule per line, naming the variable (and the path inside it);
    values of secret variables are never shown.
options:
  roles:
    description: Roles whose variables are checked; default all roles of the collection.
    type: list
    elements: str
author:
  - hpc.slurm_k8s maintainers (@hpc-slurm-k8s)
"""

EXAMPLES = r"""
- name: Check every variable before changing anything
  hpc.slurm_k8s.check_inputs:
"""

RETURN = r"""
problems:
  description: One line per failed rule, the variable then the rule.
  returned: always
  type: list
  elements: str
unknown:
  description: Variables with a role prefix that no role knows.
  returned: always
  type: list
  elements: str
"""
