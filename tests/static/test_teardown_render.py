"""Static tier: teardown.yml on a render directory removes what the collection created, and nothing else.

Starts from the renders of the value sets (defaults; external-db-nfs-nodeport for the nfs-mode
PersistentVolume under _cluster/; powersave-two-groups for the RBAC of power saving), adds manifests the collection did not create (no labels, and the
labels of another cluster), then: refused without a readable job queue (no render command: nothing
can reach slurmctld), forced teardown keeping the data, a second run changing nothing, and
teardown_delete_volumes deleting the rest. The output never shows a secret value. site.yml's index of
the files it wrote follows: it lists what the teardown kept, and goes with the last file.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, load_values, secret_values

TEARDOWN = ROOT / "playbooks" / "teardown.yml"
RECAP = re.compile(r"localhost\s*:\s*ok=\d+\s+changed=(\d+)")
FOREIGN = {
    "configmap-not-ours.yaml": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "not-ours"}},
    "configmap-other-cluster.yaml": {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "other-cluster", "labels": {"app.kubernetes.io/managed-by": "hpc.slurm_k8s",
                                                         "app.kubernetes.io/instance": "another"}}},
}


def teardown(render_dir, variables, *extra):
    vars_file = Path(str(render_dir) + ".teardown.json")
    vars_file.write_text(json.dumps(dict(variables, cluster_render_dir=str(render_dir))))
    env = dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false")
    proc = subprocess.run(["ansible-playbook", str(TEARDOWN), "-e", "@%s" % vars_file, *extra], capture_output=True,
                          text=True, timeout=600, env=env, check=False, cwd=str(ROOT))
    recap = RECAP.search(proc.stdout)
    return proc, int(recap.group(1)) if recap else None


def listing(render_dir):
    return sorted(str(p.relative_to(render_dir)) for p in Path(render_dir).rglob("*.yaml"))


@pytest.mark.parametrize("value_set, namespace, kept", [
    ("defaults", "slurm", ["_cluster/namespace-slurm.yaml", "slurm/persistentvolumeclaim-home.yaml",
                           "slurm/secret-slurm-database.yaml"]),
    ("external-db-nfs-nodeport", "slurm-prod", None),
    # power saving: its ConfigMap, ServiceAccount, Role, RoleBinding and NetworkPolicy go too
    ("powersave-two-groups", "slurm", None),
])
def test_teardown_removes_only_what_the_collection_created(renders, tmp_path, value_set, namespace, kept):
    source = renders[value_set]
    render_dir = tmp_path / "render"
    shutil.copytree(source.render_dir, render_dir)
    for name, manifest in FOREIGN.items():
        (render_dir / namespace / name).write_text(yaml.safe_dump(dict(manifest, metadata=dict(
            manifest["metadata"], namespace=namespace))))
    variables = load_values(value_set)
    before = listing(render_dir)
    foreign = sorted("%s/%s" % (namespace, name) for name in FOREIGN)

    proc, _changed = teardown(render_dir, variables)
    assert proc.returncode != 0 and "cluster_manage_slurm is false" in proc.stdout, proc.stdout[-3000:]
    assert listing(render_dir) == before, "a refused teardown deleted files"

    proc, changed = teardown(render_dir, variables, "-e", "teardown_force=true", "-vvv")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert changed and changed > 0
    left = listing(render_dir)
    data = [f for f in before if f not in foreign and (
        "/persistentvolumeclaim-" in f or "/persistentvolume-" in f or f.startswith("_cluster/namespace-")
        or f.endswith("/secret-slurm-database.yaml"))]
    assert left == sorted(data + foreign), left
    if kept is not None:
        assert data == kept
    elif value_set == "external-db-nfs-nodeport":  # nfs mode: the PersistentVolume (cluster-scoped) is data too
        assert any(f.startswith("_cluster/persistentvolume-") for f in data), data
    else:
        assert any("/role-slurm-power" in f for f in before), before
    for needle in secret_values(source):
        assert needle not in proc.stdout + proc.stderr, "a secret value was printed"
    # the index of site.yml's writes forgets what was deleted and lists what is kept (Secrets never)
    (index,) = (render_dir / ".hpc-slurm-k8s").glob("*.list")
    assert index.read_text().splitlines() == [f for f in data if "/secret-" not in f]

    proc, changed = teardown(render_dir, variables, "-e", "teardown_force=true")
    assert proc.returncode == 0 and changed == 0 and "nothing left to delete" in proc.stdout, proc.stdout[-3000:]

    proc, changed = teardown(render_dir, variables, "-e", "teardown_force=true", "-e", "teardown_delete_volumes=true")
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    assert listing(render_dir) == foreign
    assert not (render_dir / ".hpc-slurm-k8s").exists(), "the index of a cluster with no file left stays"
