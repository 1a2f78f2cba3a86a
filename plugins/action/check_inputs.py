# -*- coding: utf-8 -*-
# Copyright: (c) 2026, hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

# Documentation: plugins/modules/check_inputs.py (this action runs on the controller only).

import re

from ansible.errors import AnsibleError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.hpc.slurm_k8s.plugins.plugin_utils import _inputs, _roles

_display = Display()


def _short(message):
    """The validator's type message as '<variable>: <rule>' (the same form as the grammar rules)."""
    found = re.match(r"argument '([^']+)' is of type (\w+) and we were unable to convert to (\w+)", message)
    if found:
        name, given, wanted = found.groups()
        return "%s: must be of type %s (got a %s that cannot be converted)" % (name, wanted, given)
    found = re.match(r"value of ([^ ]+) must be one of: (.*), got: (.*)", message)
    if found:
        return "%s: must be one of %s (got %s)" % found.groups()
    return message


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        all_roles = _roles.role_names()
        roles = self._task.args.get("roles") or all_roles
        unknown_roles = sorted(set(roles) - set(all_roles))
        if unknown_roles:
            raise AnsibleError("check_inputs: no such role: %s" % ", ".join(unknown_roles))

        specs = {role: (_roles.load(self._loader, role, "meta", "argument_specs.yml").get("argument_specs") or {})
                 .get("main", {}).get("options") or {} for role in all_roles}
        # Role defaults and vars (they may refer to each other and to the play's variables) under the
        # play's variables, so that a value is checked even where its role's defaults are not in scope.
        layered = _roles.layered_variables(self._loader, task_vars)
        templar = self._templar.copy_with_new_env(available_variables=layered)

        problems, values = [], {}
        for role in roles:
            params = {}
            for name in specs[role]:
                if name not in layered:
                    continue
                try:
                    params[name] = templar.template(layered[name])
                except AnsibleError:
                    # a default that needs a fact of another role (e.g. config_nodesets): its role's
                    # preflight checks it once that fact exists
                    continue
            validated = ArgumentSpecValidator(specs[role]).validate(params)
            bad = set()
            for error in validated.errors:
                message = str(error.msg if hasattr(error, "msg") else error)
                for name in params:
                    if "'%s'" % name in message or message.startswith(name):
                        bad.add(name)
                        if name in _inputs.SECRET_VARIABLES:
                            message = "argument '%s' has a value of the wrong type or choice" % name
                problems.append(_short(message))
            values.update({name: value for name, value in validated.validated_parameters.items()
                           if name in params and name not in bad})
        problems += [str(problem) for problem in _inputs.check(values)]

        known = set().union(*specs.values())
        unknown = [str(problem) for problem in _inputs.unknown_variables(task_vars.keys(), known)]
        mode = str(templar.template(layered.get("cluster_unknown_variables", "fail")))
        if unknown and mode == "warn":
            for line in unknown:
                _display.warning(line)
        elif mode == "fail":
            problems += unknown

        result.update(changed=False, problems=problems, unknown=unknown)
        if problems:
            result.update(failed=True, msg="%d problem%s with the variables; nothing was changed:\n%s" % (
                len(problems), "" if len(problems) == 1 else "s", "\n".join("- " + line for line in problems)))
        else:
            result["msg"] = "%d variables of %d roles checked" % (len(values), len(roles))
        return result
