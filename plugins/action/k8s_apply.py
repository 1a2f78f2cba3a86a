# -*- coding: utf-8 -*-
# Copyright: (c) 2026, hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

# Documentation: plugins/modules/k8s_apply.py (this action runs on the controller only).
#
# Why an action and not tasks: the API backend of the resources role was ~12 tasks per include (stamp,
# read, select, check-mode namespace probes, apply Secrets, apply the rest, wait), ~20 includes per
# site.yml, and a task costs ~0.1 s of controller time even when it is skipped: about half of a no-op
# site.yml. Here the reads and comparisons run in this process (the kubernetes.core.k8s lookup), and
# kubernetes.core's own modules run only for what has to change or be waited for.

import base64

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase
from ansible.plugins.loader import lookup_loader

from ansible_collections.hpc.slurm_k8s.plugins.plugin_utils import _manifests
from ansible_collections.hpc.slurm_k8s.plugins.plugin_utils._k8s_apply import (
    ApplyError,
    k8s_existing, k8s_outdated, k8s_reads, k8s_stamp, k8s_unready)

_SPEC = {
    "definitions": {"type": "list", "elements": "dict", "default": []},
    "namespace": {"type": "str"},
    "network_policies": {"type": "bool", "default": True},
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    "wait": {"type": "bool", "default": True},
    "wait_timeout": {"type": "int", "default": 300},
    "field_manager": {"type": "str", "default": "hpc.slurm_k8s"},
    "auth": {"type": "dict", "default": {}},
}
_AUTH_KEYS = ("kubeconfig", "context", "host", "api_key", "username", "password", "validate_certs",
              "ca_cert", "client_cert", "client_key", "proxy", "impersonate_user", "impersonate_groups")


def _name(definition):
    return "%s/%s" % (definition.get("kind"), (definition.get("metadata") or {}).get("name"))


def _namespace(definition):
    return (definition.get("metadata") or {}).get("namespace") or ""


def _quotes_secret(message, definitions):
    """Whether `message` holds a value (or its base64 form) of one of the Secrets among `definitions`."""
    for definition in _secrets(definitions):
        values = list((definition.get("stringData") or {}).values())
        values += [base64.b64encode(str(v).encode()).decode() for v in values]
        for encoded in (definition.get("data") or {}).values():
            values.append(encoded)
            try:
                values.append(base64.b64decode(str(encoded)).decode())
            except (ValueError, UnicodeDecodeError):
                pass
        if any(str(value) and str(value) in message for value in values):
            return True
    return False


def _secrets(definitions):
    return [d for d in definitions if d.get("kind") == "Secret"]


def _plain(definitions):
    return [d for d in definitions if d.get("kind") != "Secret"]


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        self._task_vars = task_vars or {}
        result = super().run(tmp, self._task_vars)
        validated = ArgumentSpecValidator(_SPEC).validate(self._task.args)
        if validated.error_messages:
            raise AnsibleActionFail("k8s_apply: %s" % "; ".join(validated.error_messages))
        args = validated.validated_parameters
        unknown = sorted(set(args["auth"]) - set(_AUTH_KEYS))
        if unknown:
            raise AnsibleActionFail("k8s_apply: unknown auth option(s) %s; known: %s" % (
                ", ".join(unknown), ", ".join(_AUTH_KEYS)))
        self._auth = {key: value for key, value in args["auth"].items() if value not in (None, "")}
        self._args = args
        definitions, removed = self._placed(args)
        report = {"applied": [], "deleted": [], "waited_for": [], "new_namespaces": []}
        in_new_namespaces = []
        try:
            if args["state"] == "present":
                in_new_namespaces = self._present(definitions, report)
            else:
                self._absent(definitions, args["wait"], report)
        except ApplyError as error:
            raise AnsibleActionFail("k8s_apply: %s" % error) from None
        self._absent(removed, False, report)
        result.update(report, changed=bool(report["applied"] or report["deleted"]))
        if report["new_namespaces"]:
            result["msg"] = "would create %s in the new namespace %s" % (
                ", ".join(in_new_namespaces), ", ".join(report["new_namespaces"]))
        return result

    @staticmethod
    def _placed(args):
        """(definitions, removed): the namespaced definitions put in `namespace` (cluster-scoped ones
        first), checked for completeness before anything is read or sent, and the NetworkPolicies that
        network_policies=false removes instead of applying (the resources role's rules, one task)."""
        definitions = args["definitions"]
        if args["namespace"] is not None:
            definitions = _manifests.in_namespace(definitions, args["namespace"])
        problems = _manifests.problems(definitions)
        if problems:
            raise AnsibleActionFail("k8s_apply: every item of definitions needs apiVersion, kind and metadata.name: %s"
                                    % "; ".join(problems))
        return _manifests.split_policies(definitions, args["state"], args["network_policies"])

    # --- reading ----------------------------------------------------------------------------------------
    def _query(self, step, unserved_is_empty=False, **query):
        """Objects from the kubernetes.core.k8s lookup (in this process); an API error stops everything, except,
        with `unserved_is_empty`, a kind the API does not serve (the client's ResourceNotFoundError, as raised
        or wrapped by the lookup): then there is no object."""
        try:
            return lookup_loader.get("kubernetes.core.k8s", loader=self._loader, templar=self._templar).run(
                [], variables=self._task_vars, **dict(query, **self._auth))
        except Exception as error:  # the lookup raises AnsibleError and the client's own errors alike
            if unserved_is_empty and (
                    type(error).__name__ == "ResourceNotFoundError" or "No matches found for" in str(error)):
                return []
            raise AnsibleActionFail("%s: %s" % (step, error)) from None

    @staticmethod
    def _custom(api_version):
        """Whether a kind of `api_version` may be unserved: not one of Kubernetes' own API groups (no dot, or
        under k8s.io), which every API server serves."""
        group = api_version.rpartition("/")[0]
        return "." in group and not group.endswith(".k8s.io")

    def _live(self, definitions, unserved_custom_is_empty=False):
        """The live objects of `definitions`, one list per kind and namespace. With `unserved_custom_is_empty`,
        a custom resource's kind that the API does not serve (its CustomResourceDefinition is not installed)
        has no object; any other error stops everything."""
        live = []
        for read in k8s_reads(definitions):
            query = {key: value for key, value in read.items() if key != "name"}
            if "name" in read:
                query["resource_name"] = read["name"]
            live += self._query("reading the live %s objects" % read["kind"],
                                unserved_is_empty=unserved_custom_is_empty and self._custom(read["api_version"]),
                                **query)
        return live

    # --- writing ----------------------------------------------------------------------------------------
    def _module(self, step, name, module_args, group=()):
        """Run a kubernetes.core module with the credentials; return the names of the objects it changed.
        A failure names the step; its details are left out when they quote a value of a Secret in `group`."""
        returned = self._execute_module(module_name=name, module_args=dict(module_args, **self._auth),
                                        task_vars=self._task_vars)
        if returned.get("failed"):
            message = str(returned.get("msg", returned))
            if _quotes_secret(message, group):
                message = "details left out (they quote a value of the Secret)"
            raise AnsibleActionFail("%s: %s" % (step, message))
        results = returned.get("result", {}).get("results") if len(group) > 1 else [returned]
        return [_name(d) for d, done in zip(group, results or []) if done.get("changed")]

    def _present(self, definitions, report):
        """Apply what differs and wait for what is not ready; return the names of the objects that check
        mode reports, unsent, because their namespace does not exist yet."""
        args = self._args
        in_new_namespaces = []
        stamped = k8s_stamp(definitions)
        live = self._live(stamped)
        to_apply = k8s_outdated(_secrets(stamped), live) + k8s_outdated(_plain(stamped), live)
        if self._task.check_mode:
            # a server-side dry run in a namespace that does not exist fails (404): what would be created
            # there (a first deploy, whose Namespace the cluster role would create) is reported instead
            namespaces = sorted({_namespace(d) for d in to_apply} - {""})
            report["new_namespaces"] = [
                namespace for namespace in namespaces
                if not self._query("reading Namespace %s" % namespace, kind="Namespace", resource_name=namespace)]
            in_new_namespaces = [_name(d) for d in to_apply if _namespace(d) in report["new_namespaces"]]
            report["applied"] += in_new_namespaces
        for group in (_secrets(to_apply), _plain(to_apply)):
            group = [d for d in group if _namespace(d) not in report["new_namespaces"]]
            if group:
                report["applied"] += self._module("applying %s" % ", ".join(map(_name, group)), "kubernetes.core.k8s", {
                    "state": "present", "definition": group, "apply": True,
                    "server_side_apply": {"field_manager": args["field_manager"], "force_conflicts": True},
                    "wait": args["wait"], "wait_timeout": args["wait_timeout"]}, group)
        if not args["wait"]:
            return in_new_namespaces
        # a re-run that applies nothing still confirms the workloads are ready: from the objects read
        # above, and only those that are not get a wait (reads only)
        for workload in k8s_unready(stamped, live, to_apply):
            meta = workload["metadata"]
            self._module("waiting for %s to be ready" % _name(workload), "kubernetes.core.k8s_info", {
                "api_version": workload["apiVersion"], "kind": workload["kind"], "name": meta["name"],
                "namespace": meta.get("namespace"), "wait": True, "wait_timeout": args["wait_timeout"]})
            report["waited_for"].append(_name(workload))
        return in_new_namespaces

    def _absent(self, definitions, wait, report):
        """Delete what exists, in order. The objects are read first (one list per kind and namespace), so a
        deletion of what does not exist costs a read and no module run: a no-op site.yml deletes, every time,
        the parts the cluster does not run. Foreground propagation with wait: an object is gone only once
        its dependents are (a StatefulSet's pods have stopped, their preStop hooks have run)."""
        existing = k8s_existing(definitions, self._live(definitions, unserved_custom_is_empty=True)) if definitions else []
        for group in (_secrets(existing), _plain(existing)):
            if group:
                report["deleted"] += self._module("deleting %s" % ", ".join(map(_name, group)), "kubernetes.core.k8s", {
                    "state": "absent", "definition": group, "delete_options": {"propagationPolicy": "Foreground"},
                    "wait": wait, "wait_timeout": self._args["wait_timeout"]}, group)
