# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The arguments of hpc.slurm_k8s.slurm_accounting from the config role's variables.

The same translation (module_utils/_slurm_accounting.py collection_input) serves the role and the
input checks of check_inputs, so what is checked is what is applied.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.hpc.slurm_k8s.plugins.module_utils._slurm_accounting import collection_input


def slurm_accounting_input(users, qos, accounts, default_account):
    """{qos, accounts, users} for slurm_accounting from config_users, config_qos, config_accounts and
    config_default_account."""
    try:
        return collection_input(qos, accounts, users, default_account)
    except (KeyError, TypeError, AttributeError) as error:
        raise AnsibleFilterError("slurm_accounting_input: malformed input (%s): run check_inputs first" % error)


class FilterModule:
    def filters(self):
        return {"slurm_accounting_input": slurm_accounting_input}
