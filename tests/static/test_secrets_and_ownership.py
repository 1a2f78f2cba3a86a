"""Secrets and namespaces in render mode: no key material left behind by any run (render, check mode,
failing), no silent regeneration of a deployed instance's Secrets, and no takeover of another
instance's namespace (unless adopted on purpose). The same for the Kubernetes API: tests/k8s/test_bad_input.py."""

from __future__ import annotations

import base64
import hashlib
import json
import re

import pytest


def tree(path):
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


def assert_nothing_written(run, base, removed=None):
    """The refused run's directory is the base render, less the file the test removed before it."""
    expected = tree(base.render_dir)
    if removed:
        del expected[removed]
    assert tree(run.render_dir) == expected, "files changed although the run was refused"


@pytest.mark.parametrize("kind", ["render", "check", "failing"])
def test_no_key_material_is_left_behind(runs, kind):
    run = runs.result("keys/" + kind)
    if kind == "failing":
        assert run.rc != 0 and "Generate SSH host keys" in run.output, run.output[-3000:]
    else:
        assert run.rc == 0, run.output[-3000:]
    left = [str(p) for p in run.tmpdir.rglob("*")]
    assert left == [], "left in the controller's temp directory: %s" % left
    if kind == "check":
        # check mode reports the files it would write (k8s_render) and writes none
        assert not (run.render_dir / "slurm").exists()
        assert "TASK [hpc.slurm_k8s.resources : Write manifests]" in run.output
        assert re.search(r"localhost\s*:\s*ok=\d+\s+changed=[1-9]", run.output), run.output[-2000:]


def test_a_missing_munge_key_of_a_deployed_instance_is_refused(runs, renders):
    run = runs.result("refuse/munge-key-missing")
    assert run.rc != 0
    assert "The Secret(s) munge-key are missing, but instance 'slurm' is deployed" in run.output, run.output[-3000:]
    assert 'secrets_regenerate (["munge"])' in run.output
    assert_nothing_written(run, renders["defaults"], "slurm/secret-munge-key.yaml")


def test_a_change_of_the_authentication_of_a_deployed_instance_is_refused(runs, renders):
    run = runs.result("refuse/auth-type-change")
    assert run.rc != 0
    assert "cluster_auth_type: instance 'slurm' runs auth/munge (slurm.conf of its ConfigMap slurm-config), not " \
           "auth/slurm." in run.output, run.output[-3000:]
    assert "keep cluster_auth_type munge" in run.output and "Nothing was changed." in run.output
    assert_nothing_written(run, renders["defaults"])


def test_missing_database_passwords_of_an_existing_database_are_refused(runs, renders):
    # secrets_regenerate does not cover them: MariaDB keeps the passwords it was created with
    run = runs.result("refuse/database-missing")
    assert run.rc != 0
    assert "The Secret slurm-database (the database passwords) is missing" in run.output, run.output[-3000:]
    assert "MariaDB keeps the passwords it was created with" in run.output
    assert_nothing_written(run, renders["defaults"], "slurm/secret-slurm-database.yaml")


def test_another_instance_in_the_namespace_is_refused_with_both_names(runs, renders):
    run = runs.result("refuse/other-instance")
    assert run.rc != 0
    assert "belongs to the instance 'slurm' of hpc.slurm_k8s" in run.output, run.output[-3000:]
    assert "this run is for the instance 'other' (cluster_name)" in run.output
    assert "cluster_adopt_instance" in run.output
    assert_nothing_written(run, renders["defaults"])


def test_an_adopted_namespace_is_relabelled_and_keeps_its_secrets(runs, renders):
    run = runs.result("refuse/adopted").check()
    before = renders["defaults"]
    assert {doc["metadata"]["labels"]["app.kubernetes.io/instance"] for doc in run.docs().values()} == {"other"}
    for name in ("munge-key", "slurm-database", "ssh-host-keys"):
        assert run.get("Secret", name)["data"] == before.get("Secret", name)["data"]


def test_an_external_database_password_comes_from_the_sites_secret(runs, renders):
    """database_external_password_secret is read from the backend (here the render directory) and checked;
    slurmdbd mounts the site's Secret key and the password is in no file the collection writes (so a
    rotation of the site's Secret needs no template change); the internal database is removed."""
    from conftest import EXTERNAL_DB_PASSWORD  # pylint: disable=import-outside-toplevel
    run = runs.result("refuse/external-db-secret").check()
    slurmdbd_conf = base64.b64decode(run.get("Secret", "slurmdbd-config")["data"]["slurmdbd.conf"]).decode()
    assert not re.search(r"^StoragePass", slurmdbd_conf, re.M) and "StorageHost=db.example.org\n" in slurmdbd_conf
    statefulset = run.get("StatefulSet", "slurmdbd")
    volume = next(v for v in statefulset["spec"]["template"]["spec"]["volumes"] if v["name"] == "storage-password")
    assert volume["secret"]["secretName"] == "site-db" and volume["secret"]["items"] == [{"key": "password", "path": "password"}]
    site = run.get("Secret", "site-db")
    checksum = hashlib.sha256(json.dumps(site["data"], sort_keys=True).encode()).hexdigest()
    assert statefulset["spec"]["template"]["metadata"]["annotations"]["hpc.slurm-k8s/checksum-storage-password"] == checksum
    assert not (run.render_dir / "slurm" / "statefulset-mariadb.yaml").exists()
    assert not (run.render_dir / "slurm" / "secret-slurm-database-external.yaml").exists()
    assert EXTERNAL_DB_PASSWORD not in run.output
    encoded = base64.b64encode(EXTERNAL_DB_PASSWORD.encode()).decode()
    leaked = [path for path in run.docs() if path != "slurm/secret-site-db.yaml"
              and (EXTERNAL_DB_PASSWORD in (run.render_dir / path).read_text() or encoded in (run.render_dir / path).read_text())]
    assert leaked == []


def test_an_external_database_password_that_slurmdbd_conf_cannot_hold_is_refused(runs, renders):
    """The site's Secret holds a password with a space and '#': refused in the preflight, naming the Secret
    and the key but not the value, before anything is written."""
    from conftest import EXTERNAL_DB_BAD_PASSWORD  # pylint: disable=import-outside-toplevel
    run = runs.result("refuse/external-db-bad-secret")
    assert run.rc != 0
    assert "database_external_password_secret: the value of key password of the Secret site-db must be" in run.output, \
        run.output[-3000:]
    assert EXTERNAL_DB_BAD_PASSWORD not in run.output and "S1te owned" not in run.output
    expected = tree(renders["defaults"].render_dir)
    expected["slurm/secret-site-db.yaml"] = tree(run.render_dir)["slurm/secret-site-db.yaml"]
    assert tree(run.render_dir) == expected, "files changed although the run was refused"
