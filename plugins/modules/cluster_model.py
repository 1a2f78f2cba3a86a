#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done by the action plugin of the same name (plugins/action/cluster_model.py), on the
# controller; this file holds its documentation.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: cluster_model
short_description: Compute the cluster model that every role and template of the collection reads
version_added: 0.1.0
attributes:
  check_mode:
    support: full
    description: Only computes; behaves the same in check mode.
  diff_mode:
    support: none
    description: Only computes; nothing to diff.
description:
  - Runs on the controller and changes nothing. The C(hpc.slurm_k8s.cluster) role's preflight runs it once
    per play, after C(hpc.slurm_k8s.check_inputs) has checked the variables it reads.
  - Renders the fields of C(roles/cluster/files/model.yml) in order, with every role's defaults and vars
    layered under the play's variables (so a field is right even where the role it comes from is not in
    scope yet), into the fact C(cluster_model). A field may use the fields above it.
  - "Fields: names, labels, selectors, versions, the settings several roles read (host network, internal
    database, auth/jwt keys), the pod parts every component uses (security context, capabilities,
    checkov annotations), the NetworkPolicy peers and the shared templates. docs/model.md describes each."
options: {}
author:
  - hpc.slurm_k8s maintainers (@hpc-slurm-k8s)
"""

EXAMPLES = r"""
- name: Compute the cluster model
  hpc.slurm_k8s.cluster_model:

- name: Use it in a manifest
  ansible.builtin.debug:
    msg: "{{ cluster_model.labels | combine({'app.kubernetes.io/name': 'slurmctld'}) }}"
"""

RETURN = r"""
ansible_facts:
  description: The fact C(cluster_model).
  returned: always
  type: dict
  contains:
    cluster_model:
      description: The model (docs/model.md).
      type: dict
      returned: always
      sample:
        name: slurm
        namespace: slurm
        selector: {app.kubernetes.io/instance: slurm, app.kubernetes.io/part-of: slurm}
        host_network: false
        job_components: [worker, burst-worker]
"""
