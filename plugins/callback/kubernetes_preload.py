# -*- coding: utf-8 -*-
# Copyright: (c) 2026, hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: kubernetes_preload
type: aggregate
short_description: Import the Kubernetes client once in ansible-playbook, before it forks a worker per task
version_added: 0.1.0
description:
  - C(ansible-playbook) runs each task in a worker process forked from itself. A task that reads the API in
    the controller (the C(kubernetes.core.k8s) lookup, the C(hpc.slurm_k8s.k8s_resources) lookup, the
    C(hpc.slurm_k8s.k8s_apply) action) imports the Python Kubernetes client and the client code of
    C(kubernetes.core) in its worker, about 0.2 s of CPU every time, and the import ends with the worker.
  - This callback imports them once, in C(ansible-playbook) itself, when it loads its callbacks; every worker
    then starts with them. It prints nothing, adds no event handler and changes no result. Without it, or
    without the Kubernetes client, the same runs take more CPU.
  - The repository's C(ansible.cfg) enables it (C(callbacks_enabled)). C(ANSIBLE_CALLBACKS_ENABLED) in the
    environment replaces that list; add C(hpc.slurm_k8s.kubernetes_preload) to it to keep it.
requirements:
  - the C(kubernetes) Python package and the C(kubernetes.core) collection (else it loads nothing)
"""

from ansible.plugins.callback import CallbackBase

# Loaded in ansible-playbook's own process, before any worker is forked: what is imported here is in every
# worker's sys.modules from its start. The imports are those of the kubernetes.core lookup and of our action.
try:
    import kubernetes.client  # noqa: F401  pylint: disable=unused-import
    import kubernetes.config  # noqa: F401  pylint: disable=unused-import
    import kubernetes.dynamic  # noqa: F401  pylint: disable=unused-import
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s import (  # noqa: F401  pylint: disable=unused-import
        client as _k8s_client,
        resource as _k8s_resource,
    )
except ImportError:
    # nothing to preload: the tasks that need the client report its absence themselves
    pass


class CallbackModule(CallbackBase):
    """No event handler: loading this module is all it does."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "hpc.slurm_k8s.kubernetes_preload"
    CALLBACK_NEEDS_ENABLED = True
