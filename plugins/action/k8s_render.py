# -*- coding: utf-8 -*-
# Copyright: (c) 2026, hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

# Documentation: plugins/modules/k8s_render.py (this action runs on the controller only).

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from ansible_collections.hpc.slurm_k8s.plugins.plugin_utils import _manifests

_SPEC = {
    "directory": {"type": "path", "required": True},
    "definitions": {"type": "list", "elements": "dict", "default": []},
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    "batches": {"type": "list", "elements": "dict", "options": {
        "definitions": {"type": "list", "elements": "dict", "default": []},
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        "owner": {"type": "str", "default": "?"},
    }},
    "index": {"type": "str"},
    "prune": {"type": "bool", "default": False},
}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars or {})
        validated = ArgumentSpecValidator(_SPEC).validate(self._task.args)
        if validated.error_messages:
            raise AnsibleActionFail("k8s_render: %s" % "; ".join(validated.error_messages))
        args = validated.validated_parameters
        if not args["directory"].startswith("/"):
            raise AnsibleActionFail("k8s_render: directory must be an absolute path (got %s)" % args["directory"])
        if args["batches"] is not None and args["definitions"]:
            raise AnsibleActionFail("k8s_render: give either definitions (with state) or batches, not both")
        if args["index"] is not None and args["batches"] is None:
            raise AnsibleActionFail("k8s_render: index needs batches")
        if args["prune"] and args["index"] is None:
            raise AnsibleActionFail("k8s_render: prune needs an index (the files an earlier run wrote)")
        owners = {}
        try:
            if args["batches"] is None:
                steps = _manifests.plan(args["directory"], args["definitions"], args["state"])
            else:
                steps, owners = _manifests.plan_batches(args["directory"], args["batches"], args["index"],
                                                        args["prune"])
        except (_manifests.ManifestError, OSError) as error:
            raise AnsibleActionFail("k8s_render: %s" % error) from None

        # diffs first: applying replaces what they show as before
        diffs = [self._diff(path, action, text, secret) for path, action, text, _mode, secret in steps] \
            if self._task.diff else []
        if steps and not self._task.check_mode:
            try:
                _manifests.apply(steps)
            except OSError as error:
                raise AnsibleActionFail("k8s_render: %s (files before it in the list were written; a re-run "
                                        "converges)" % error) from None
        by_action = {action: [path for path, done, _text, _mode, _secret in steps if done == action]
                     for action in ("create", "update", "chmod", "remove")}
        wanted = len(args["definitions"]) if args["batches"] is None else \
            len({_manifests.manifest_path(args["directory"], definition)
                 for batch in args["batches"] for definition in batch["definitions"]})
        # steps with no owner: files of the index that no batch names (pruned), and the index itself
        index = _manifests.index_path(args["directory"], args["index"]) if args["index"] is not None else None
        result.update(changed=bool(steps), created=by_action["create"], updated=by_action["update"],
                      modes_fixed=by_action["chmod"], removed=by_action["remove"],
                      pruned=[path for path in by_action["remove"] if path not in owners and path != index],
                      unchanged=wanted - len(owners), changed_owners=sorted(set(owners.values())))
        if diffs:
            result["diff"] = diffs
        return result

    @staticmethod
    def _diff(path, action, text, secret):
        if secret:  # a Secret's content never leaves the controller's files
            return {"before_header": path, "after_header": path,
                    "prepared": "%s: Secret manifest %s (content not shown)\n" % (path, action)}
        before = "" if action == "create" else _manifests.read_text(path) or ""
        return {"before_header": path, "after_header": path, "before": before,
                "after": "" if action == "remove" else (text if text is not None else before)}
