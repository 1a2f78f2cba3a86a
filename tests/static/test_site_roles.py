"""Static tier: one list of the roles of a deployment.

upgrade.yml and scale.yml run `_cluster_site_roles` (roles/cluster/vars/main.yml); site.yml names its
roles twice (the preflight loop and `roles:`), because its pre_tasks run before that variable is
loaded. All three must agree, in order, or an upgrade would skip (or reorder) a role that site.yml runs.
"""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_site_yml_runs_the_roles_that_upgrade_and_scale_run():
    site_roles = yaml.safe_load((ROOT / "roles" / "cluster" / "vars" / "main.yml").read_text())["_cluster_site_roles"]
    play = yaml.safe_load((ROOT / "playbooks" / "site.yml").read_text())[0]
    preflight = next(task for task in play["pre_tasks"] if task["name"] == "Check every role before changing anything")
    assert preflight["loop"] == site_roles
    assert [entry["role"] for entry in play["roles"]] == ["hpc.slurm_k8s.%s" % role for role in site_roles]
    for role in ("upgrade", "scale"):
        variables = (ROOT / "roles" / role / "vars" / "main.yml").read_text()
        assert "_cluster_site_roles" in variables, "%s must run the roles of _cluster_site_roles" % role
