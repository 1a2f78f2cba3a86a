"""Static tier: the cluster model (docs/model.md) is the one thing roles share.

No role, playbook or entry point reads another role's `_`-private variable; every field of
roles/cluster/files/model.yml is documented, and a render's `cluster_model` has exactly those fields
(plus `templates`, which the action adds)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLES = sorted(path.name for path in (ROOT / "roles").iterdir() if (path / "meta" / "argument_specs.yml").is_file())
PRIVATE = re.compile(r"(?<![A-Za-z0-9_.])_(%s)_[a-z0-9_]+" % "|".join(ROLES))


def _sources():
    for path in sorted((ROOT / "roles").rglob("*")):
        if path.is_file() and path.suffix in (".yml", ".j2"):
            yield path.relative_to(ROOT).parts[1], path
    for path in sorted(list((ROOT / "playbooks").glob("*.yml")) + list(ROOT.glob("*.yml"))):
        yield None, path


def test_no_role_reads_another_roles_private_variable():
    found = []
    for owner, path in _sources():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            found += ["%s:%d: %s" % (path.relative_to(ROOT), number, match.group(0))
                      for match in PRIVATE.finditer(line) if match.group(1) != owner]
    assert found == [], "private variables read outside their role (use cluster_model or a public output):\n" + "\n".join(found)


def test_every_model_field_is_documented():
    fields = list(yaml.safe_load((ROOT / "roles" / "cluster" / "files" / "model.yml").read_text())) + ["templates"]
    documented = re.findall(r"^\| `([a-z_]+)` \|", (ROOT / "docs" / "model.md").read_text(), re.MULTILINE)
    assert documented == fields


def _model(*extra):
    """cluster_model as the action computes it outside any role (an ad-hoc run: no role is in scope, so
    every value comes from the layered role defaults and the given variables). Run from playbooks/, as the
    collection's version is read from galaxy.yml beside the playbook directory."""
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="minimal")
    proc = subprocess.run(["ansible", "localhost", "-m", "hpc.slurm_k8s.cluster_model", *extra],
                          capture_output=True, text=True, env=env, cwd=str(ROOT / "playbooks"), timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    # minimal: "localhost | SUCCESS => {result as JSON}"
    return json.loads(proc.stdout.split("=>", 1)[1])["ansible_facts"]["cluster_model"]


def test_the_model_has_every_field_and_the_roles_defaults_outside_any_role():
    fields = list(yaml.safe_load((ROOT / "roles" / "cluster" / "files" / "model.yml").read_text())) + ["templates"]
    model = _model("-e", "cluster_name=demo")
    assert sorted(model) == sorted(fields)
    assert model["namespace"] == "slurm-demo" and model["selector"] == {
        "app.kubernetes.io/instance": "demo", "app.kubernetes.io/part-of": "slurm"}
    # slurmd's and database's defaults, though neither role is in scope
    assert model["host_network"] is False and model["database_internal"] is True
    assert model["slurm_jwt_conf"] == {} and "rest-api" not in model["slurm_daemon_clients"]
    assert model["checkov_slurm"][-1].startswith("CKV_K8S_15=imagePullPolicy is cluster_image_pull_policy (IfNotPresent)")
    assert Path(model["templates"]["slurmd_pod_parts"]).is_file()

    changed = _model("-e", "cluster_name=demo", "-e", '{"slurmd_host_network": true, "cluster_slurmrestd_enabled": true}',
                     "-e", "cluster_image_pull_policy=Always", "-e", "database_mode=external")
    assert changed["host_network"] is True and changed["database_internal"] is False
    assert changed["slurm_daemon_clients"][-1] == "rest-api" and changed["slurm_jwt_conf"]["AuthAltTypes"] == "auth/jwt"
    assert changed["checkov_pull_policy"] == [] and not any(s.startswith("CKV_K8S_15") for s in changed["checkov_slurm"])


def test_site_yml_computes_the_model_once(renders):
    output = renders["defaults"].output
    assert output.count("TASK [hpc.slurm_k8s.cluster : Compute the cluster model]") == 1, output[-3000:]
