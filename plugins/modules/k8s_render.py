#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done by the action plugin of the same name (plugins/action/k8s_render.py), on the
# controller; this file holds its documentation.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: k8s_render
short_description: Write Kubernetes manifests to a render directory, changing only what differs
version_added: 0.1.0
attributes:
  check_mode:
    support: full
    description: Compares and reports what it would write or remove, and writes nothing.
  diff_mode:
    support: partial
    description: Before and after of each changed file; for a Secret only its path (the content is never shown).
description:
  - The directory backend of the C(hpc.slurm_k8s.resources) role (C(cluster_render_dir)); runs on the
    controller in one step for any number of manifests, comparing each with its file in memory.
  - "Layout: C(<directory>/<namespace>/<kind>-<name>.yaml), cluster-scoped kinds under C(_cluster/)."
  - Each file holds one manifest as YAML with sorted keys, so an unchanged manifest writes nothing and
    reports no change. Secrets are written with mode 0600, other files 0644; directories are created 0755.
  - Writes are atomic (temporary file in the same directory, then rename).
  - The result names files only, never their content.
options:
  directory:
    description: The render directory (absolute path).
    type: path
    required: true
  definitions:
    description:
      - Manifests with C(apiVersion), C(kind), C(metadata.name), and C(metadata.namespace) for namespaced kinds.
    type: list
    elements: dict
    default: []
  state:
    description: C(present) writes each manifest's file; C(absent) removes them.
    type: str
    choices: [present, absent]
    default: present
  batches:
    description:
      - Instead of O(definitions) and O(state), manifests collected over a play in batches, written in
        one step. Where batches name the same file, the last one decides it (its state and content).
      - Used by C(hpc.slurm_k8s.resources) in C(site.yml), where every role adds its manifests and one
        step at the end of the roles writes them all.
    type: list
    elements: dict
    suboptions:
      definitions:
        description: Manifests, as in O(definitions).
        type: list
        elements: dict
        default: []
      state:
        description: C(present) or C(absent), as O(state), for this batch's manifests.
        type: str
        choices: [present, absent]
        default: present
      owner:
        description: Who added the batch (a role name), named in errors and in RV(changed_owners).
        type: str
        default: "?"
  index:
    description:
      - With O(batches), the name of an index of the files these writes own,
        C(<directory>/.hpc-slurm-k8s/<index>.list) (a hidden directory, and an extension that
        C(kubectl apply -R) ignores). The roles use C(<namespace>-<instance>).
      - The index gains the file of every present manifest of the batches and loses the file of every
        absent one; an index left empty is removed (with its directory, when no other index is in it).
        Secrets are never recorded.
      - Omitted, no index is kept.
    type: str
  prune:
    description:
      - With O(index), and O(batches) that hold every manifest of a run (C(site.yml) without C(--tags)),
        also remove the files the index lists that no batch names any more (a resource an earlier version
        rendered), and no other file, so a file it never wrote (a site's own, or a Secret) is never
        removed. The index then lists exactly the present manifests.
    type: bool
    default: false
author:
  - hpc.slurm_k8s maintainers (@hpc-slurm-k8s)
"""

EXAMPLES = r"""
- name: Write the manifests that two roles collected, the later batch deciding a file both name
  hpc.slurm_k8s.k8s_render:
    directory: /srv/render
    batches:
      - owner: storage
        definitions:
          - {apiVersion: v1, kind: Service, metadata: {name: nfs, namespace: slurm}, spec: {ports: [{port: 2049}]}}
      - owner: teardown
        state: absent
        definitions:
          - {apiVersion: v1, kind: Service, metadata: {name: nfs, namespace: slurm}}

- name: Write the manifests
  hpc.slurm_k8s.k8s_render:
    directory: /srv/render
    definitions:
      - apiVersion: v1
        kind: ConfigMap
        metadata: {name: example, namespace: slurm}
        data: {key: value}
"""

RETURN = r"""
created:
  description: Files written that did not exist.
  returned: always
  type: list
  elements: str
updated:
  description: Files whose content was replaced.
  returned: always
  type: list
  elements: str
modes_fixed:
  description: Files whose content was right but whose mode was not.
  returned: always
  type: list
  elements: str
removed:
  description: Files removed (state absent, pruned, or an index left empty).
  returned: always
  type: list
  elements: str
pruned:
  description: Files removed because the O(index) listed them, O(prune) was set and no batch names them.
  returned: always
  type: list
  elements: str
unchanged:
  description: How many manifests (files, with O(batches)) already matched their files.
  returned: always
  type: int
changed_owners:
  description: With O(batches), the owners of the batches that decided a changed file (sorted); else empty.
  returned: always
  type: list
  elements: str
  sample: [config, slurmd]
"""
