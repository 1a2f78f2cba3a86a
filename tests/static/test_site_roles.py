"""Static tier: one list of the roles of a deployment.

upgrade.yml and scale.yml run `cluster_model.site_roles` (roles/cluster/files/model.yml); site.yml names its
roles twice (the preflight loop and the imports of its `tasks:`), because its pre_tasks run before that variable is
loaded. All three must agree, in order, or an upgrade would skip (or reorder) a role that site.yml runs.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from conftest import PRUNE_INDEX

ROOT = Path(__file__).resolve().parents[2]


def test_site_yml_runs_the_roles_that_upgrade_and_scale_run():
    site_roles = yaml.safe_load((ROOT / "roles" / "cluster" / "files" / "model.yml").read_text())["site_roles"]
    play = yaml.safe_load((ROOT / "playbooks" / "site.yml").read_text())[0]
    preflight = next(task for task in play["pre_tasks"] if task["name"] == "Check every role before changing anything")
    assert preflight["loop"] == site_roles
    imported = [task["ansible.builtin.import_role"] for task in play["tasks"] if "ansible.builtin.import_role" in task]
    assert [entry["name"] for entry in imported] == ["hpc.slurm_k8s.%s" % role for role in site_roles]
    assert "roles" not in play
    for role in ("upgrade", "scale"):
        variables = (ROOT / "roles" / role / "vars" / "main.yml").read_text()
        assert "cluster_model.site_roles" in variables, "%s must run the roles of cluster_model.site_roles" % role


def _changed_files(run, base):
    before, after = base.docs(), run.docs()
    return sorted(path for path in set(before) | set(after) if before.get(path) != after.get(path))


def test_tags_apply_one_component_with_every_check_and_computation(runs, renders):
    """`--tags slurmd` with a worker and a slurm.conf change writes only the slurmd StatefulSet; `--tags
    config` only the ConfigMap. The preflights, the API and ownership checks, and what the component's
    manifests need (Secrets read, config rendered) run under any tags."""
    base = renders["defaults"]
    slurmd = runs.result("restart/tags-slurmd").check()
    assert _changed_files(slurmd, base) == ["slurm/statefulset-slurmd.yaml"]
    assert slurmd.get("StatefulSet", "slurmd")["spec"]["replicas"] == 3
    assert "TASK [hpc.slurm_k8s.secrets : Read existing Secrets]" in slurmd.output
    assert "TASK [hpc.slurm_k8s.cluster : Note the instances that own the namespace]" in slurmd.output
    config = runs.result("restart/tags-config").check()
    assert _changed_files(config, base) == ["slurm/configmap-slurm-config.yaml"]
    assert "MaxJobCount=12345\n" in config.get("ConfigMap", "slurm-config")["data"]["slurm.conf"]


def test_the_render_command_runs_once_after_every_role_wrote(runs, renders):
    """site.yml collects the roles' manifests and writes them in one step after the roles: a run that
    changes the files of two roles (config, slurmd) runs cluster_render_command once, with both files
    written; an unchanged re-run does not run it."""
    second = runs.result("restart/render-command").check()
    assert second.output.count("TASK [hpc.slurm_k8s.resources : Write manifests]") == 1, second.output[-3000:]
    log = Path(str(second.render_dir) + ".command.log").read_text().splitlines()
    files = len(list(renders["defaults"].render_dir.rglob("*.yaml")))
    assert log == ["%d files, 1, 1" % files]
    assert re.search(r"localhost\s*:\s*ok=\d+\s+changed=0", second.output), second.output[-2000:]


def test_network_policies_off_removes_exactly_the_network_policies(runs, renders):
    """cluster_network_policies is applied in one place (the resources role) for every role: turned off on
    a rendered cluster, every NetworkPolicy file goes and nothing else changes."""
    base = renders["defaults"]
    run = runs.result("restart/no-network-policies").check()
    policies = sorted(path for path, doc in base.docs().items() if doc["kind"] == "NetworkPolicy")
    assert len(policies) >= 5
    assert _changed_files(run, base) == policies
    assert not run.by_kind("NetworkPolicy")


def test_each_preflight_runs_once_per_play(renders):
    """site.yml's pre_tasks run every role's preflight; the roles then skip their own (its first task
    shows once)."""
    output = renders["defaults"].output
    for role in yaml.safe_load((ROOT / "roles" / "cluster" / "files" / "model.yml").read_text())["site_roles"]:
        first = yaml.safe_load((ROOT / "roles" / role / "tasks" / "preflight.yml").read_text())[0]["name"]
        assert output.count("TASK [hpc.slurm_k8s.%s : %s]" % (role, first)) == 1, (role, first)
    assert "TASK [Note the roles whose preflight passed]" in output and "TASK [Forget the preflights of this play]" in output


def _manifest_files(render_dir):
    return sorted(str(path.relative_to(render_dir)) for path in render_dir.rglob("*.yaml"))


def test_the_index_lists_every_manifest_but_the_secrets(renders):
    """site.yml records what it rendered (for pruning): every file but the Secrets, nothing else."""
    run = renders["defaults"]
    listed = (run.render_dir / PRUNE_INDEX).read_text().splitlines()
    assert listed == [path for path in _manifest_files(run.render_dir) if "/secret-" not in path]
    assert len(listed) >= 20


def test_a_full_run_prunes_only_what_an_earlier_run_wrote(runs, renders):
    """A file the index lists and no role renders any more goes (reported); a file of the site, a Secret
    and a path outside the directory stay, though two of them are listed; the index then lists what this
    run rendered."""
    base = renders["defaults"]
    run = runs.result("restart/prune").check()
    remaining = _manifest_files(run.render_dir)
    assert "slurm/configmap-retired.yaml" not in remaining
    assert {"slurm/configmap-site-own.yaml", "slurm/secret-retired.yaml"} <= set(remaining)
    assert (run.render_dir.parent / "outside.yaml").exists()
    assert sorted(set(remaining) - {"slurm/configmap-site-own.yaml", "slurm/secret-retired.yaml"}) \
        == _manifest_files(base.render_dir)
    assert (run.render_dir / PRUNE_INDEX).read_text() == (base.render_dir / PRUNE_INDEX).read_text()
    assert re.search(r"localhost\s*:\s*ok=\d+\s+changed=1\s", run.output), run.output[-2000:]


def test_a_tags_run_prunes_nothing_and_keeps_the_index(runs, renders):
    """Under --tags the batches hold a part of the cluster: nothing is pruned, the index stays."""
    base = renders["defaults"]
    run = runs.result("restart/tags-slurmd").check()
    assert (run.render_dir / PRUNE_INDEX).read_text() == (base.render_dir / PRUNE_INDEX).read_text()
    assert _manifest_files(run.render_dir) == _manifest_files(base.render_dir)
