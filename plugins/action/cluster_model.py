# -*- coding: utf-8 -*-
# Copyright: (c) 2026, hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

# Documentation: plugins/modules/cluster_model.py (this action runs on the controller only).

import os

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.plugins.action import ActionBase

from ansible_collections.hpc.slurm_k8s.plugins.plugin_utils import _roles

MODEL_FILE = ("cluster", "files", "model.yml")
# shared templates that roles render from another role's directory, by absolute path
TEMPLATES = {name: os.path.join(_roles.ROLES_DIR, "cluster", "templates", path) for name, path in {
    "slurmd_pod_parts": "slurmd-pod-parts.yaml.j2",
    "network_policy": "network-policy.yaml.j2",
    "check_pod": "check-pod.yaml.j2",
}.items()}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        fields = _roles.load(self._loader, *MODEL_FILE, templates=True)
        layered = _roles.layered_variables(self._loader, task_vars)
        model = {}
        # field by field, in the file's order: a field may use the ones above it (cluster_model.<field>)
        for name, expression in fields.items():
            templar = self._templar.copy_with_new_env(available_variables=dict(layered, cluster_model=dict(model)))
            try:
                model[name] = templar.template(expression)
            except AnsibleError as error:
                raise AnsibleActionFail("cluster_model: field '%s' of roles/%s: %s" % (
                    name, "/".join(MODEL_FILE), error.message)) from None
        model["templates"] = dict(TEMPLATES)
        result.update(changed=False, ansible_facts={"cluster_model": model})
        return result
