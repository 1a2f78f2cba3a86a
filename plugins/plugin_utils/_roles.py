# -*- coding: utf-8 -*-
# Copyright: (c) 2026, hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's roles as data, for the controller-side actions that look at all of them at once
(check_inputs, cluster_model): their names, argument specs, and every role's defaults and vars layered
under the play's variables, so that a value is known even where its role is not in scope (a playbook
that includes only some roles, or includes them after the action runs)."""

from __future__ import annotations

import os

ROLES_DIR = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "roles"))


def role_names():
    return sorted(name for name in os.listdir(ROLES_DIR)
                  if os.path.isfile(os.path.join(ROLES_DIR, name, "meta", "argument_specs.yml")))


def load(loader, role, *parts, templates=False):
    """A YAML file of a role (relative parts), {} when it does not exist; templates=True marks its strings
    as templates (role defaults and vars, which refer to other variables)."""
    path = os.path.join(ROLES_DIR, role, *parts)
    if not os.path.isfile(path):
        return {}
    return loader.load_from_file(path, trusted_as_template=templates) or {}


def layered_variables(loader, task_vars):
    """Every role's defaults, then vars, then the play's variables on top (the play wins, as in a play
    that lists every role)."""
    layered = {}
    for role in role_names():
        layered.update(load(loader, role, "defaults", "main.yml", templates=True))
        layered.update(load(loader, role, "vars", "main.yml", templates=True))
    layered.update(task_vars)
    return layered
