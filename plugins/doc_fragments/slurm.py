# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # Options shared by every module that talks to Slurm (see module_utils/_slurm_runner.py).
    DOCUMENTATION = r"""
options:
  slurm_conf:
    description:
      - Path of the C(slurm.conf) the Slurm commands read, exported to them as E(SLURM_CONF).
      - Omit it to use the Slurm client's default (C(/etc/slurm/slurm.conf) or configless mode).
    type: path
requirements:
  - The Slurm client commands C(scontrol) and C(squeue) (Slurm 22.05 or later) on the target host, with
    a working C(munge) authentication to the controller. In Kubernetes, the playbooks of hpc.slurm_k8s
    run these modules inside the slurmctld pod through the C(kubernetes.core.kubectl) connection; on a
    bare-metal cluster, target any host where C(scontrol ping) works.
notes:
  - Slurm's own hostlist parser (C(scontrol show hostnames)) expands node expressions, so every syntax
    Slurm accepts works here too.
"""
