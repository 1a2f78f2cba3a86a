"""Static tier: render site.yml in render mode for every value set once, then check the manifests.

Every ansible-playbook run of the tier (value sets, restart variants, invalid inputs) is started at
the first use of the `runs` fixture and runs concurrently (STATIC_JOBS, default 3); the tests only
read the results. Nothing touches a cluster: render mode writes files, and the invalid inputs must
fail before anything is written.
"""

from __future__ import annotations

import base64
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.support import power as power_program  # noqa: E402  pylint: disable=wrong-import-position

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
VALUES = HERE / "values"
SITE = ROOT / "playbooks" / "site.yml"
VALUE_SETS = sorted(p.stem for p in VALUES.glob("*.yml"))
# renders run with -vvv, whose output must hold no secret value (the generated Secrets, and a
# user-supplied external database password)
VERBOSE_SETS = ("defaults", "external-db-nfs-nodeport")
# cluster_render_command of the render-command variant: one line per run (files, then the two changed
# values as the command finds them), to the log file given as $1
RENDER_COMMAND_LOGGER = ('printf "%s files, %s, %s\\n" "$(find "$SLURM_K8S_RENDER_DIR" -name "*.yaml" | wc -l)" '
                         '"$(grep -c "replicas: 3" "$SLURM_K8S_RENDER_DIR/slurm/statefulset-slurmd.yaml")" '
                         '"$(grep -c MaxJobCount=12345 "$SLURM_K8S_RENDER_DIR/slurm/configmap-slurm-config.yaml")" >> "$1"')
# the password in the site's own Secret of the external-db-secret run (read by the database role)
EXTERNAL_DB_PASSWORD = "S1te-owned-DB-pass"
# the site's own Secrets a value set refers to (written into its render directory before the run, as a site
# creates them before site.yml): the portal's certificate and its OIDC client secret
SITE_SECRETS = {
    "portal-local": {"portal-tls": {"tls.crt": "-----BEGIN CERTIFICATE-----\nnot checked here\n-----END CERTIFICATE-----\n",
                                    "tls.key": "-----BEGIN PRIVATE KEY-----\nnot checked here\n-----END PRIVATE KEY-----\n"}},
    "portal-oidc": {"portal-oidc": {"client-secret": "site-owned-oidc-client-secret"}},
}
# users the restart/slurm-conf variant adds to the defaults (which have none): two in one group, one with a key
VARIANT_USERS = [{"name": "bob", "uid": 3001, "gid": 3000, "shell": "/bin/zsh",
                  "authorized_keys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDqBVzoCUOejZKZNjJ10e0QYmdbLUhsp3N70OwWnSMu2 bob"]},
                 {"name": "carol", "uid": 3002, "gid": 3000}]
# ... and one that slurmdbd.conf cannot hold (a space and '#'), refused before anything is written
EXTERNAL_DB_BAD_PASSWORD = "S1te owned#DB"


class Run:
    """One finished ansible-playbook run."""

    def __init__(self, name, render_dir, argv, proc, seconds):
        self.name = name
        self.render_dir = Path(render_dir)
        self.argv = argv
        self.rc = proc.returncode
        self.output = proc.stdout + proc.stderr
        self.seconds = seconds
        self._burst_pods = None

    def check(self):
        if self.rc != 0:
            raise AssertionError("%s: ansible-playbook failed (rc=%s)\n%s" % (self.name, self.rc, self.output[-6000:]))
        return self

    def files(self, pattern="**/*.yaml"):
        return sorted(self.render_dir.glob(pattern))

    def docs(self):
        """{relative path: manifest} of every rendered file."""
        return {str(p.relative_to(self.render_dir)): yaml.safe_load(p.read_text()) for p in self.files()}

    def by_kind(self, *kinds):
        return [doc for doc in self.docs().values() if doc["kind"] in kinds]

    def get(self, kind, name):
        found = [doc for doc in self.by_kind(kind) if doc["metadata"]["name"] == name]
        return found[0] if found else None

    def burst_pods(self):
        """The pods the power-save program would create (node 0 of each power-save group), built by the program
        itself from ConfigMap slurm-power: they are workloads too, though no manifest file holds them."""
        if self._burst_pods is None:
            self._burst_pods = self._build_burst_pods()
        return self._burst_pods

    def _build_burst_pods(self):
        power = self.get("ConfigMap", "slurm-power")
        if power is None:
            return []
        module = power_program.load()
        files = Path(str(self.render_dir) + ".power")
        files.mkdir(exist_ok=True)
        config = json.loads(power["data"]["config.json"])
        for group in config["groups"]:
            name = Path(group["pod_template"]).name
            (files / name).write_text(power["data"][name])
            group["pod_template"] = str(files / name)
        program = module.PowerProgram(module.Config(config), _OwnerOnlyClient())
        return [program.build_pod(group.prefix + "0", group) for group in program.config.groups]


class _OwnerOnlyClient:  # pylint: disable=too-few-public-methods
    """Stands in for the program's Kubernetes client: build_pod only asks for the owner's uid."""

    @staticmethod
    def get_statefulset_uid(name):
        return "uid-of-%s" % name


def playbook(name, render_dir, variables, extra=(), verbose=False, env=None):
    """Run site.yml in render mode with `variables` (a dict, passed as a JSON file)."""
    vars_file = Path(str(render_dir) + ".vars.json")
    vars_file.write_text(json.dumps(dict(variables, cluster_render_dir=str(render_dir))))
    env = dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", ANSIBLE_PIPELINING="1",
               ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false", ANSIBLE_RETRY_FILES_ENABLED="0", **(env or {}))
    argv = ["ansible-playbook", str(SITE), "-e", "@%s" % vars_file, *extra] + (["-vvv"] if verbose else [])
    started = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900, env=env, check=False, cwd=str(ROOT))
    return Run(name, render_dir, argv, proc, time.monotonic() - started)


PRUNE_INDEX = Path(".hpc-slurm-k8s") / "slurm-slurm.list"


def write_prune_fixtures(render_dir):
    """Files for the prune variant: configmap-retired.yaml (listed in the index: pruned), and, not to be
    removed, configmap-site-own.yaml (not listed), secret-retired.yaml (listed, but a Secret) and
    ../outside.yaml (listed, outside the directory)."""
    def configmap(name):
        return yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "slurm"}})
    (render_dir / "slurm" / "configmap-retired.yaml").write_text(configmap("retired"))
    (render_dir / "slurm" / "configmap-site-own.yaml").write_text(configmap("site-own"))
    (render_dir / "slurm" / "secret-retired.yaml").write_text(yaml.safe_dump(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "retired", "namespace": "slurm"}}))
    (render_dir.parent / "outside.yaml").write_text(configmap("outside"))
    with open(render_dir / PRUNE_INDEX, "a", encoding="utf-8") as index:
        index.write("slurm/configmap-retired.yaml\nslurm/secret-retired.yaml\n../outside.yaml\n")


def load_values(name):
    return yaml.safe_load((VALUES / ("%s.yml" % name)).read_text()) or {}


class Runs:
    """Starts every run of the tier at once; results by name."""

    def __init__(self, workdir: Path, jobs: int):
        self.workdir = workdir
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs)
        self.futures = {}
        started = time.monotonic()
        self.started = started
        for name in VALUE_SETS:  # -vvv (costs CPU): test_no_secret_outside_secrets searches the output
            self.futures["values/" + name] = self.pool.submit(self._values_run, name)
        from test_bad_input import CASES  # pylint: disable=import-outside-toplevel
        for case_id, variables, _expected in CASES:
            self.futures["bad/" + case_id] = self.pool.submit(
                playbook, case_id, workdir / "bad" / case_id, dict(load_values("defaults"), **variables))
        # Last in the queue: they start from the defaults render and wait for it.
        self.futures["restart/slurm-conf"] = self.pool.submit(self._variant, "slurm-conf")
        self.futures["restart/munge-key"] = self.pool.submit(self._variant, "munge-key")
        for kind in ("tags-slurmd", "tags-config", "render-command", "no-network-policies", "prune"):
            self.futures["restart/" + kind] = self.pool.submit(self._variant, kind)
        for kind in ("munge-key-missing", "database-missing", "other-instance", "adopted", "external-db-secret",
                     "external-db-bad-secret", "auth-type-change"):
            self.futures["refuse/" + kind] = self.pool.submit(self._variant, kind)
        for kind in ("render", "check", "failing"):
            self.futures["keys/" + kind] = self.pool.submit(self._key_run, kind)

    def _values_run(self, name):
        """site.yml with a value set, after the site's own Secrets it names (SITE_SECRETS) are written where the
        render directory keeps the namespace's objects."""
        render_dir = self.workdir / "values" / name
        for secret, data in SITE_SECRETS.get(name, {}).items():
            (render_dir / "slurm").mkdir(parents=True, exist_ok=True)
            (render_dir / "slurm" / ("secret-%s.yaml" % secret)).write_text(yaml.safe_dump({
                "apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret, "namespace": "slurm"},
                "data": {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}}))
        return playbook(name, render_dir, load_values(name), verbose=name in VERBOSE_SETS)

    def _key_run(self, kind):
        """A run that generates SSH host keys with its own TMPDIR (and, failing, an ssh-keygen that fails
        after writing its key), for test_no_key_material_is_left_behind."""
        base = self.workdir / "keys" / kind
        (base / "tmp").mkdir(parents=True)
        env = {"TMPDIR": str(base / "tmp")}
        if kind == "failing":
            fake = base / "bin"
            fake.mkdir()
            (fake / "ssh-keygen").write_text(
                '#!/bin/sh\nwhile [ $# -gt 1 ]; do [ "$1" = -f ] && out=$2; shift; done\n'
                'printf -- "-----BEGIN OPENSSH PRIVATE KEY-----\\nfake\\n" > "$out"; exit 1\n')
            (fake / "ssh-keygen").chmod(0o755)
            env["PATH"] = "%s:%s" % (fake, os.environ["PATH"])
        run = playbook(kind, base / "render", load_values("defaults"), extra=["--check"] if kind == "check" else [],
                       env=env)
        run.tmpdir = base / "tmp"
        return run

    def _variant(self, kind):
        base = self.result("values/defaults").check()
        target = self.workdir / "restart" / kind
        shutil.copytree(base.render_dir, target)
        variables, extra = load_values("defaults"), []
        if kind.startswith("tags-"):
            # two changes, one component selected: only that component's files may change
            variables.update(slurmd_replicas=3, config_slurm_conf={"MaxJobCount": 12345})
            extra = ["--tags", kind.split("-", 1)[1]]
        elif kind == "render-command":
            # changes in two roles' files; the command logs what it finds when it runs (once, after both
            # are written), then a second, unchanged run must not run it at all
            variables.update(slurmd_replicas=3, config_slurm_conf={"MaxJobCount": 12345}, cluster_manage_slurm=False,
                             cluster_render_command=["sh", "-c", RENDER_COMMAND_LOGGER, "render-command",
                                                     str(target) + ".command.log"])
            first = playbook(kind, target, variables)
            if first.rc != 0:
                return first
        elif kind == "no-network-policies":
            variables["cluster_network_policies"] = False
        elif kind == "prune":
            # what an earlier version rendered and no role renders now (listed in site.yml's index), next to
            # what the index must never make us remove: a file of the site, a Secret, a path outside
            write_prune_fixtures(target)
        elif kind == "slurm-conf":
            variables.update(config_slurm_conf={"MaxJobCount": 12345}, config_users=VARIANT_USERS)
        elif kind == "munge-key":
            # a deleted Secret is generated again on the next run when asked for: a new munge key
            (target / "slurm" / "secret-munge-key.yaml").unlink()
            variables["secrets_regenerate"] = ["munge"]
        elif kind == "munge-key-missing":
            (target / "slurm" / "secret-munge-key.yaml").unlink()
        elif kind == "auth-type-change":
            # the deployed instance runs munge (its slurm.conf says so): auth/slurm is refused before anything
            variables["cluster_auth_type"] = "slurm"
        elif kind == "database-missing":
            (target / "slurm" / "secret-slurm-database.yaml").unlink()
            variables["secrets_regenerate"] = ["munge", "ssh"]
        elif kind in ("other-instance", "adopted"):
            # another cluster_name in the namespace of the rendered instance 'slurm'
            variables.update(cluster_name="other", cluster_namespace="slurm")
            if kind == "adopted":
                variables["cluster_adopt_instance"] = "slurm"
        elif kind in ("external-db-secret", "external-db-bad-secret"):
            # the site's own Secret, next to the rendered files, holds the external database's password (with a
            # trailing line break, as `kubectl create secret --from-file` of an echoed file has it; or one that
            # slurmdbd.conf cannot hold)
            password = EXTERNAL_DB_PASSWORD + "\n" if kind == "external-db-secret" else EXTERNAL_DB_BAD_PASSWORD
            (target / "slurm" / "secret-site-db.yaml").write_text(yaml.safe_dump({
                "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "site-db", "namespace": "slurm"},
                "data": {"password": base64.b64encode(password.encode()).decode()}}))
            variables.update(database_mode="external", database_external_host="db.example.org",
                             database_external_password_secret={"name": "site-db", "key": "password"})
        return playbook(kind, target, variables, extra=extra)

    def result(self, name) -> Run:
        return self.futures[name].result()


@pytest.fixture(scope="session")
def runs(tmp_path_factory):
    if shutil.which("ansible-playbook") is None:
        pytest.fail("ansible-playbook not found: run `make deps` and use the venv")
    workdir = tmp_path_factory.mktemp("static")
    (workdir / "values").mkdir()
    (workdir / "restart").mkdir()
    (workdir / "bad").mkdir()
    (workdir / "keys").mkdir()
    sys.path.insert(0, str(HERE))
    all_runs = Runs(workdir, int(os.environ.get("STATIC_JOBS", "3")))
    yield all_runs
    all_runs.pool.shutdown(wait=True)
    timings = {name: round(f.result().seconds, 1) for name, f in all_runs.futures.items() if f.done() and not f.exception()}
    print("\nstatic tier: %d ansible-playbook runs, wall %.0f s; per run: %s"
          % (len(timings), time.monotonic() - all_runs.started, json.dumps(timings)))


@pytest.fixture(scope="session")
def renders(runs):
    """{value set: Run} of the successful renders (a failed render fails the test using it)."""
    return {name: runs.result("values/" + name).check() for name in VALUE_SETS}


def secret_values(run: Run):
    """Every secret value of a render, read back from its Secret files (decoded), as search needles."""
    import base64  # pylint: disable=import-outside-toplevel
    needles = set()
    for doc in run.by_kind("Secret"):
        for key, encoded in (doc.get("data") or {}).items():
            value = base64.b64decode(encoded).decode()
            if key.endswith(".pub"):
                continue
            if "PRIVATE KEY" in value:
                # the key material, line by line (the BEGIN/END lines are not secret)
                needles.update(line for line in value.splitlines() if len(line) >= 40 and "PRIVATE KEY" not in line)
            elif key == "slurmdbd.conf":
                continue  # no password in it (slurmdbd's entrypoint adds StoragePass from a mounted Secret)
            else:
                needles.add(value)
                needles.add(encoded)
    return {n for n in needles if len(n) >= 8}
