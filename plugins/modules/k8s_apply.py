#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done by the action plugin of the same name (plugins/action/k8s_apply.py), on the
# controller; this file holds its documentation.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: k8s_apply
short_description: Apply or delete Kubernetes manifests, writing only what differs from the live objects
version_added: 0.1.0
attributes:
  check_mode:
    support: full
    description:
      - Reads the live objects and runs the changes as server-side dry runs. What would be created in a
        namespace that does not exist yet (a first deploy) is reported, not sent.
  diff_mode:
    support: none
    description: The result names the objects applied or deleted; the objects' fields are not shown.
description:
  - The Kubernetes API backend of the C(hpc.slurm_k8s.resources) role, in one controller-side step for any
    number of manifests.
  - Each manifest is stamped with a digest of itself (annotation C(hpc.slurm-k8s/manifest-sha256)); the live
    objects are read with one list per apiVersion, kind and namespace (the C(kubernetes.core.k8s) lookup, in
    the controller process); only the manifests whose object is missing, stamped differently or drifted
    (a field the manifest sets holds another value) are applied, with server-side apply through
    C(kubernetes.core.k8s). An unchanged manifest costs a read, never a write.
  - Secrets are applied before the other manifests, in a call of their own.
  - With O(wait), each apply waits for its objects, and the unchanged workloads (Deployment, StatefulSet,
    DaemonSet) whose live object is not rolled out and ready are waited for (reads only).
  - With O(state=absent), the objects that exist are deleted in the order given, with foreground
    propagation, Secrets first. An object of a kind the cluster does not serve (a custom resource whose
    CustomResourceDefinition is not installed) does not exist and is left out.
  - The result names objects only, never a Secret's content; a failure names the step and leaves out its
    details when they quote a value of a Secret.
options:
  definitions:
    description: Manifests, each with apiVersion, kind and metadata.name (and metadata.namespace where namespaced).
    type: list
    elements: dict
    default: []
  namespace:
    description:
      - Put every namespaced manifest of O(definitions) in this namespace (metadata.namespace), and apply the
        cluster-scoped ones (a Namespace) first. Left out, the manifests are used as given.
      - Incomplete manifests (no apiVersion, kind or metadata.name) fail the task before anything is read or
        sent, naming each one.
    type: str
  network_policies:
    description:
      - With V(false) and O(state=present), the NetworkPolicies among O(definitions) are deleted (without
        waiting, after the rest) instead of applied, so that turning them off removes what an earlier run
        created. The C(hpc.slurm_k8s.resources) role passes C(cluster_network_policies).
    type: bool
    default: true
  state:
    description: C(present) applies O(definitions), C(absent) deletes them.
    type: str
    choices: [present, absent]
    default: present
  wait:
    description: Wait for the applied objects (and unready workloads), or for deleted objects to be gone.
    type: bool
    default: true
  wait_timeout:
    description: Seconds each wait may take.
    type: int
    default: 300
  field_manager:
    description: Field manager of server-side apply.
    type: str
    default: hpc.slurm_k8s
  auth:
    description:
      - Connection options of C(kubernetes.core) (C(kubeconfig), C(context), C(host), C(api_key), ...), for
        the reads and the modules alike; empty values are left out. The C(hpc.slurm_k8s.cluster) role
        gives them as C(cluster_api_auth).
    type: dict
    default: {}
author:
  - hpc.slurm_k8s maintainers (@hpc-slurm-k8s)
"""

EXAMPLES = r"""
- name: Apply the manifests of a component, writing only what changed
  hpc.slurm_k8s.k8s_apply:
    definitions: "{{ lookup('ansible.builtin.template', 'manifests.yaml.j2') | ansible.builtin.from_yaml_all }}"
    namespace: slurm
    auth:
      kubeconfig: /etc/kubernetes/admin.conf
"""

RETURN = r"""
applied:
  description: Objects (C(Kind/name)) created or changed, or that would be in check mode.
  returned: always
  type: list
  elements: str
  sample: [ConfigMap/slurm-config, StatefulSet/slurmctld]
deleted:
  description: Objects deleted (O(state=absent), or the NetworkPolicies that O(network_policies=false) removes).
  returned: always
  type: list
  elements: str
waited_for:
  description: Unchanged workloads that were not ready and were waited for.
  returned: always
  type: list
  elements: str
new_namespaces:
  description: In check mode, the namespaces that do not exist yet, in which RV(applied) objects would be created.
  returned: always
  type: list
  elements: str
msg:
  description: In check mode, what would be created in the namespaces that do not exist yet.
  returned: when new_namespaces is not empty
  type: str
"""
