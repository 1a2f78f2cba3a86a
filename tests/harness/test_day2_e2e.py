"""Tier T3: day-2 playbooks (upgrade, scale, teardown) on the Docker harness, with real Slurm jobs.

One cluster (namespace slurm-day2, 2 workers) is deployed by site.yml in render mode with kdock as the
render command, as test_cluster_e2e.py does. The tests run in order and share it: upgrade refused
while a job runs; upgrade waiting for it while a pending job keeps its id and runs after; a
config-only upgrade without any restart; an admin-drained node and an upgrade interrupted after its
pre phase, finished by an image upgrade that replaces every pod while a job stays queued; the timed
image upgrade back; the dump restores; scale down refused / waiting / without ghost node; teardown
refused while a job runs, keeping the volumes, idempotent.
The images get tags of their own (day2-old, day2-new: the same build with another version label,
so another image id) so that a build of the shared tags by another test cannot replace pods here.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import time

import pytest

from e2e_support import DOCKER, HERE, KDOCK, ROOT, docker_connection, playbook, require_docker, run, wait_for

NAMESPACE = "slurm-day2"
CTLD = "%s_slurmctld-0" % NAMESPACE
PREFIX = "hpc-slurm-k8s"
OLD, NEW = "day2-old", "day2-new"
WINDOW = re.compile(r"maintenance window ([0-9.]+) s")
PODS = ("mariadb-0", "slurmdbd-0", "slurmctld-0", "slurmd-0", "slurmd-1")
RELEASE = "/tmp/day2-release"


def release_job():
    time.sleep(5)
    run([DOCKER, "exec", "%s_slurmd-0" % NAMESPACE, "touch", RELEASE])


def ctld(*command, check=True):
    return run([DOCKER, "exec", CTLD, *command], check=check, timeout=60)


def nodes():
    """name -> (state, reason) as sinfo shows them."""
    out = ctld("sinfo", "-h", "-N", "-o", "%N|%t|%E", check=False).stdout
    return dict((n, (s, r)) for n, s, r in (line.split("|") for line in out.splitlines() if line.strip()))


def job_state(job):
    return ctld("squeue", "-h", "-j", job, "-o", "%T", check=False).stdout.strip()


def accounted_state(job):
    return ctld("sacct", "-n", "-X", "-j", job, "-o", "State", check=False).stdout.split()


def sbatch(*args):
    return ctld("sbatch", "--parsable", *args).stdout.strip().split(";")[0]


def image_id(ref):
    return run([DOCKER, "image", "inspect", "-f", "{{.Id}}", ref]).stdout.strip()


def container(pod, field):
    return run([DOCKER, "inspect", "-f", "{{%s}}" % field, "%s_%s" % (NAMESPACE, pod)]).stdout.strip()


class Deployment:
    def __init__(self, workdir):
        self.workdir = workdir
        self.render_dir = workdir / "render"
        self.backup_dir = workdir / "backups"
        self.vars_file = workdir / "vars.json"
        self.timings = {}
        self.variables = {
            "cluster_name": "day2",
            "cluster_image_tag": OLD,
            "cluster_render_dir": str(self.render_dir),
            "cluster_render_command": KDOCK + ["apply", str(self.render_dir), "--wait", "--timeout", "300"],
            "cluster_slurmctld_connection": docker_connection(CTLD),
            "upgrade_slurmdbd_connection": docker_connection("%s_slurmdbd-0" % NAMESPACE),
            "upgrade_backup_dir": str(self.backup_dir),
            "storage_class": "harness-rwx",
            "database_image": "%s/mariadb-test:%s" % (PREFIX, OLD),
            "login_service_type": "NodePort",
            "login_node_port": 30222,
            "slurmd_replicas": 2,
            "slurmd_cpus": 1,
            "slurmd_memory_mib": 512,
        }
        self.save()

    def save(self, **changes):
        self.variables.update(changes)
        self.vars_file.write_text(json.dumps(self.variables))

    def playbook(self, name, *extra, check=True, when_output=None):
        return playbook(ROOT / "playbooks" / ("%s.yml" % name), self.vars_file, *extra, check=check,
                        log_dir=self.workdir, when_output=when_output)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    require_docker()
    deployment = Deployment(tmp_path_factory.mktemp("day2"))
    started = time.monotonic()
    for tag in (OLD, NEW):
        run(["bash", str(ROOT / "tests" / "images" / "build-images.sh"), tag], timeout=1800)
    for name in ("slurm", "slurm-daemon"):
        assert image_id("%s/%s:%s" % (PREFIX, name, NEW)) != image_id("%s/%s:%s" % (PREFIX, name, OLD))
    deployment.timings["images_s"] = time.monotonic() - started
    run(KDOCK + ["delete", "--namespace", NAMESPACE, "--volumes"], check=False)
    _proc, changed, seconds = deployment.playbook("site")
    deployment.timings["site_s"] = seconds
    assert changed > 0
    wait_for(lambda: [s for s, _r in nodes().values()] == ["idle", "idle"], 60, "both nodes idle")
    yield deployment
    print("\nday2 timings: %s" % json.dumps({k: round(v, 1) for k, v in deployment.timings.items()}))
    if os.environ.get("KEEP_E2E") != "1":
        run(KDOCK + ["delete", "--namespace", NAMESPACE, "--volumes"], check=False)


def test_upgrade_refused_while_a_job_runs(cluster):
    # runs until the test releases it (a file in its pod), however long the playbooks take here
    job = sbatch("-w", "slurmd-0", "--wrap", "while [ ! -e %s ]; do sleep 0.5; done" % RELEASE)
    wait_for(lambda: job_state(job) == "RUNNING", 30, "job %s running" % job)
    before = nodes()
    proc, _changed, seconds = cluster.playbook("upgrade", check=False)
    cluster.timings["upgrade_refused_s"] = seconds
    assert proc.returncode != 0
    assert "refused: 1 job(s) active (%s)" % job in proc.stdout and "Nothing was changed" in proc.stdout, proc.stdout[-3000:]
    assert nodes() == before and all("drain" not in s for s, _r in before.values())
    assert job_state(job) == "RUNNING"
    assert not list(cluster.backup_dir.glob("*.sql.gz")), "a refused upgrade must not even back up"
    cluster.running_job = job


def test_upgrade_waits_for_the_job_and_keeps_the_pending_one(cluster):
    running = cluster.running_job
    pending = sbatch("-w", "slurmd-0", "-o", "/tmp/day2-%j.out", "--wrap", "hostname")
    wait_for(lambda: job_state(pending) == "PENDING", 10, "job %s pending" % pending)
    # release the running job only once the upgrade has drained and is waiting for it
    proc, _changed, seconds = cluster.playbook(
        "upgrade", "-e", "upgrade_wait_for_jobs=true", "-e", "upgrade_wait_timeout=300",
        when_output=("TASK [hpc.slurm_k8s.upgrade : Wait for the active jobs to end", release_job))
    cluster.timings["upgrade_noop_with_job_wait_s"] = seconds
    window = float(WINDOW.search(proc.stdout).group(1))
    waited = float(re.search(r"no active job \(waited ([0-9.]+) s\)", proc.stdout).group(1))
    cluster.timings["window_noop_incl_job_wait_s"] = window
    assert waited > 1.5, "the upgrade did not wait for job %s" % running
    assert accounted_state(running) == ["COMPLETED"]
    # nothing changed: a no-op upgrade runs no render command
    assert not re.search(r"TASK \[hpc\.slurm_k8s\.resources : Run the render command\][^\n]*\nchanged", proc.stdout)
    wait_for(lambda: accounted_state(pending) == ["COMPLETED"], 30, "pending job %s completed after the upgrade" % pending)
    assert set(s for s, _r in nodes().values()) == {"idle"}


def test_noop_upgrade_window(cluster):
    started = dict((pod, container(pod, ".State.StartedAt")) for pod in PODS)
    proc, _changed, seconds = cluster.playbook("upgrade")
    cluster.timings["upgrade_noop_s"] = seconds
    cluster.timings["window_noop_s"] = float(WINDOW.search(proc.stdout).group(1))
    assert "roles to roll out: none (nothing changes)" in proc.stdout
    assert "resumed slurmd-0, slurmd-1;" in proc.stdout
    assert set(s for s, _r in nodes().values()) == {"idle"}
    assert dict((pod, container(pod, ".State.StartedAt")) for pod in PODS) == started
    assert not list(cluster.backup_dir.glob("*.sql.gz")), "nothing changed in slurmdbd or the database: no dump"


def test_config_only_upgrade_restarts_nothing(cluster):
    started = dict((pod, container(pod, ".State.StartedAt")) for pod in PODS)
    cluster.save(config_slurm_conf={"MaxJobCount": 23456})
    proc, changed, seconds = cluster.playbook("upgrade")
    cluster.timings["upgrade_config_only_s"] = seconds
    assert changed > 0 and "Reconfigure Slurm" in proc.stdout and "roles to roll out: config\"" in proc.stdout
    assert "23456" in ctld("scontrol", "show", "config").stdout.split("MaxJobCount")[1].split("\n")[0]
    assert dict((pod, container(pod, ".State.StartedAt")) for pod in PODS) == started, "a container was restarted"
    assert set(s for s, _r in nodes().values()) == {"idle"}


def test_interrupted_upgrade_converges_admin_drain_stays_queued_job_keeps_its_id(cluster):
    ctld("scontrol", "update", "nodename=slurmd-1", "state=drain", "reason=admin: bad DIMM")
    cluster.playbook("upgrade", "-e", "upgrade_phase=pre")
    state = nodes()
    assert state["slurmd-0"][0] == "drain" and state["slurmd-0"][1] == "hpc.slurm_k8s:upgrade cluster upgrade"
    assert state["slurmd-1"] == ("drain", "admin: bad DIMM")
    # submitted while the nodes are drained: it must survive the pod replacements with its id
    queued = sbatch("-w", "slurmd-0", "--wrap", "hostname")
    assert job_state(queued) == "PENDING"
    old = dict((pod, container(pod, ".Image")) for pod in PODS if pod != "mariadb-0")
    # interrupted here; the re-run (now with new images) converges
    proc, _changed, seconds = cluster.playbook("upgrade", "-e", "cluster_image_tag=%s" % NEW)
    cluster.timings["upgrade_image_s"] = seconds
    cluster.timings["window_image_after_interruption_s"] = float(WINDOW.search(proc.stdout).group(1))
    for pod, image in old.items():
        expected = image_id("%s/%s:%s" % (PREFIX, "slurm" if pod.startswith("slurmd-") else "slurm-daemon", NEW))
        assert container(pod, ".Image") == expected != image, pod
    state = nodes()
    assert state["slurmd-1"] == ("drain", "admin: bad DIMM"), "the admin's drain was lost: %s" % state
    assert "resumed slurmd-0;" in proc.stdout and "left drained: slurmd-1" in proc.stdout
    wait_for(lambda: accounted_state(queued) == ["COMPLETED"], 30, "queued job %s completed after the upgrade" % queued)
    ctld("scontrol", "update", "nodename=slurmd-1", "state=resume")
    wait_for(lambda: set(s for s, _r in nodes().values()) == {"idle"}, 30, "both nodes idle")


def test_image_upgrade_window(cluster):
    # back to the old images: a pure image change, every pod replaced, timed drain -> resume
    proc, _changed, seconds = cluster.playbook("upgrade")
    cluster.timings["upgrade_image_back_s"] = seconds
    cluster.timings["window_image_s"] = float(WINDOW.search(proc.stdout).group(1))
    assert container("slurmd-0", ".Image") == image_id("%s/slurm:%s" % (PREFIX, OLD))
    assert set(s for s, _r in nodes().values()) == {"idle"} and sorted(nodes()) == ["slurmd-0", "slurmd-1"]
    assert re.search(r"node\(s\) back with Slurm 24\.11", proc.stdout)
    assert sorted(ctld("srun", "-N2", "hostname").stdout.split()) == ["slurmd-0", "slurmd-1"]   # task order is not defined


def test_database_dump_restores(cluster):
    dumps = sorted(cluster.backup_dir.glob("slurm-day2-slurm_acct_db-*.sql.gz"))
    # one per image upgrade (slurmdbd changed); none for the no-op and config-only upgrades
    assert len(dumps) == 2 and all(re.search(r"-\d{8}T\d{6}Z\.sql\.gz$", d.name) for d in dumps)
    assert oct(dumps[-1].stat().st_mode & 0o777) == "0o600"
    sql = gzip.decompress(dumps[-1].read_bytes())
    assert b"Dump completed" in sql[-200:]
    maria = "%s_mariadb-0" % NAMESPACE
    root = 'MYSQL_PWD="$(cat "$MARIADB_ROOT_PASSWORD_FILE")" mariadb -uroot'
    shell = root + ' -N -e "%s"'
    run([DOCKER, "exec", maria, "sh", "-c", shell % "DROP DATABASE IF EXISTS restore_check; CREATE DATABASE restore_check"])
    run([DOCKER, "exec", "-i", maria, "sh", "-c", root + " restore_check"], input=sql.decode())
    count = "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema='%s'"
    restored = run([DOCKER, "exec", maria, "sh", "-c", shell % (count % "restore_check")]).stdout.strip()
    live = run([DOCKER, "exec", maria, "sh", "-c", shell % (count % "slurm_acct_db")]).stdout.strip()
    assert int(restored) > 10 and restored == live
    jobs = "SELECT COUNT(*) FROM %s.day2_job_table"
    assert int(run([DOCKER, "exec", maria, "sh", "-c", shell % (jobs % "restore_check")]).stdout) >= 3
    run([DOCKER, "exec", maria, "sh", "-c", shell % "DROP DATABASE restore_check"])


def test_scale_down_refused_then_waits_and_leaves_no_ghost(cluster):
    job = sbatch("-w", "slurmd-1", "--wrap", "sleep 15")
    wait_for(lambda: job_state(job) == "RUNNING", 30, "job %s running" % job)
    proc, _changed, _seconds = cluster.playbook("scale", "-e", "slurmd_replicas=1", check=False)
    assert proc.returncode != 0 and "refused: 1 job(s) active on slurmd-1 (%s)" % job in proc.stdout
    assert sorted(nodes()) == ["slurmd-0", "slurmd-1"] and "drain" not in nodes()["slurmd-1"][0]
    proc, _changed, seconds = cluster.playbook("scale", "-e", "slurmd_replicas=1", "-e", "scale_wait_for_jobs=true")
    cluster.timings["scale_down_wait_s"] = seconds
    assert accounted_state(job) == ["COMPLETED"]
    assert sorted(nodes()) == ["slurmd-0"], "ghost node left: %s" % nodes()
    time.sleep(5)
    assert sorted(nodes()) == ["slurmd-0"]
    assert run([DOCKER, "inspect", "%s_slurmd-1" % NAMESPACE], check=False).returncode != 0
    cluster.save(slurmd_replicas=1)


def test_teardown_refused_then_keeps_volumes_and_is_idempotent(cluster):
    job = sbatch("--wrap", "sleep 30")
    wait_for(lambda: job_state(job) == "RUNNING", 30, "job %s running" % job)
    proc, _changed, _seconds = cluster.playbook("teardown", check=False)
    assert proc.returncode != 0 and "refused: 1 job(s) active (%s)" % job in proc.stdout
    assert job_state(job) == "RUNNING"
    ctld("scancel", job)
    wait_for(lambda: job_state(job) == "", 30, "job %s gone" % job)
    proc, changed, seconds = cluster.playbook("teardown")
    cluster.timings["teardown_s"] = seconds
    assert changed > 0
    containers = run([DOCKER, "ps", "-a", "--filter", "label=kdock.namespace=%s" % NAMESPACE, "-q"]).stdout.split()
    assert containers == []
    volumes = set(run([DOCKER, "volume", "ls", "-q"]).stdout.split())
    kept = set("kdock-%s-%s" % (NAMESPACE, claim) for claim in ("home", "data-mariadb-0", "state-slurmctld-0"))
    assert kept <= volumes, (kept - volumes)
    left = sorted(p.name for p in (cluster.render_dir / NAMESPACE).iterdir())
    assert left == ["persistentvolumeclaim-home.yaml", "secret-slurm-database.yaml"], left
    kept_message = re.search(r"kept: ([^(\"]*)", proc.stdout).group(1)
    assert sorted(kept_message.strip().split(", ")) == [
        "Namespace %s" % NAMESPACE, "PersistentVolumeClaim home", "Secret slurm-database"], kept_message
    proc, changed, _seconds = cluster.playbook("teardown")
    assert changed == 0 and "nothing left to delete" in proc.stdout
