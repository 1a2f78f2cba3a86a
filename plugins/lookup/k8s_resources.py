# -*- coding: utf-8 -*-
# Copyright: (c) 2026, hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: k8s_resources
short_description: Read resources from the collection's backend, the Kubernetes API or the render directory
version_added: 0.1.0
description:
  - The read half of the C(hpc.slurm_k8s.resources) role, for both backends, so that a role reads a
    resource with one expression, whichever backend the play uses.
  - With C(cluster_render_dir) set, reads the files of that directory (layout of the C(hpc.slurm_k8s.k8s_render)
    module); else the Kubernetes API through the C(kubernetes.core.k8s) lookup, with C(cluster_kubeconfig)
    and C(cluster_context).
  - Returns a list of objects; a named resource that does not exist gives an empty list. Any other
    error (API unreachable, unreadable file) fails, so that nothing is decided on a guess.
  - Runs on the controller (no module fork). The result may hold Secrets, so use it under C(no_log).
options:
  kind:
    description: Kind of the resources.
    type: str
    required: true
  api_version:
    description: API version of the kind (used by the API backend).
    type: str
    default: v1
  name:
    description: Name of one resource; without it, every resource of the kind in the namespace.
    type: str
  namespace:
    description:
      - Namespace; ignored for cluster-scoped kinds (Namespace, PersistentVolume, StorageClass, ...).
      - Default C(cluster_namespace).
    type: str
  label_selector:
    description: Equality selectors, comma-separated (C(key=value,key2=value2)).
    type: str
  render_dir:
    description: The render directory, empty for the Kubernetes API; default C(cluster_render_dir).
    type: str
  kubeconfig:
    description: Kubeconfig file for the API backend; default C(cluster_kubeconfig), empty for the default file.
    type: str
  context:
    description: Kubeconfig context for the API backend; default C(cluster_context), empty for the current one.
    type: str
author:
  - hpc.slurm_k8s maintainers (@hpc-slurm-k8s)
"""

EXAMPLES = r"""
- name: Read the deployed slurm.conf, from whichever backend the play uses
  ansible.builtin.debug:
    msg: "{{ (query('hpc.slurm_k8s.k8s_resources', kind='ConfigMap', name='slurm-config') | first).data['slurm.conf'] }}"
"""

RETURN = r"""
_list:
  description: The resources found, as dicts (an empty list when a named one does not exist).
  type: list
  elements: dict
"""

import glob
import os
import re

from ansible.errors import AnsibleLookupError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.common.yaml import yaml_load
from ansible.plugins.loader import lookup_loader
from ansible.plugins.lookup import LookupBase

from ansible_collections.hpc.slurm_k8s.plugins.plugin_utils import _manifests


_EQUALITY = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._/-]*)\s*=\s*([A-Za-z0-9._-]*)\s*$")


def _selector(text):
    """'key=value,key2=value2' as a dict; other selector forms (!=, in, exists) are refused."""
    pairs = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        match = _EQUALITY.match(part)
        if not match:
            raise AnsibleLookupError("k8s_resources: label_selector supports key=value terms only (got %r)" % part)
        pairs[match.group(1)] = match.group(2)
    return pairs


_OPTIONS = {"kind": {"type": "str", "required": True}, "api_version": {"type": "str", "default": "v1"},
            "name": {"type": "str"}, "namespace": {"type": "str"}, "label_selector": {"type": "str"},
            "render_dir": {"type": "str"}, "kubeconfig": {"type": "str"}, "context": {"type": "str"}}
# option -> the play variable that is its default (templated here: role variables are templates)
_FROM_PLAY = {"namespace": "cluster_namespace", "render_dir": "cluster_render_dir",
              "kubeconfig": "cluster_kubeconfig", "context": "cluster_context"}


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        validated = ArgumentSpecValidator(_OPTIONS).validate(kwargs)
        if validated.error_messages:
            raise AnsibleLookupError("k8s_resources: %s" % "; ".join(validated.error_messages))
        options = validated.validated_parameters
        for option, variable in _FROM_PLAY.items():
            if options[option] is None and variable in (variables or {}):
                options[option] = self._templar.template(variables[variable])
        kind, name = options["kind"], options["name"]
        namespace = None if kind in _manifests.CLUSTER_KINDS else options["namespace"]
        if options["render_dir"]:
            return self._from_directory(options["render_dir"], kind, name, namespace, _selector(options["label_selector"]))
        query = {key: options[key] for key in ("kubeconfig", "context", "label_selector") if options[key]}
        query.update(kind=kind, api_version=options["api_version"])
        if namespace:
            query["namespace"] = namespace
        if name:
            query["resource_name"] = name
        return lookup_loader.get("kubernetes.core.k8s", loader=self._loader, templar=self._templar).run(
            [], variables=variables, **query)

    @staticmethod
    def _from_directory(render_dir, kind, name, namespace, labels):
        try:
            pattern = os.path.join(render_dir, _manifests.relative_path(kind, glob.escape(name) if name else "*", namespace))
        except _manifests.ManifestError as error:
            raise AnsibleLookupError("k8s_resources: %s" % error) from None
        found = []
        for path in sorted(glob.glob(pattern)):
            try:
                with open(path, "r", encoding="utf-8") as handle:
                    obj = yaml_load(handle)
            except (OSError, ValueError) as error:
                raise AnsibleLookupError("k8s_resources: cannot read %s: %s" % (path, error)) from None
            if not isinstance(obj, dict) or obj.get("kind") != kind:
                continue  # a '*' glob of kind 'x' also matches 'x-y-...' files of kind 'x-y'
            have = (obj.get("metadata") or {}).get("labels") or {}
            if all(have.get(key) == value for key, value in labels.items()):
                found.append(obj)
        return found
