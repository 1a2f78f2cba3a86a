"""Tier T3: day-2 playbooks (upgrade, scale, teardown) on a real Kubernetes, with real Slurm jobs.

One cluster (namespace slurm-day2, 2 workers) is deployed by site.yml through the API. The tests run
in order and share it: a no-op upgrade while a job runs (nothing drained, nothing written to the API), then
a slurm.conf change refused while it runs; that config-only upgrade waiting for the job while a pending job
keeps its id and runs after (the printed maintenance window from the job's time limit), reconfigured without
any restart; a munge key rotation
refused by site.yml, then an admin-drained node and an upgrade interrupted after its pre phase, finished
by an image upgrade that also rotates the munge key (every pod replaced) while a job stays queued;
site.yml back to 24.11 refused (a downgrade), then with another build of 26.05 and configless nodes (the
cluster starts with slurm.conf mounted everywhere) while a job runs on each worker (the slurmd rollout: one pod at a
time, each after its job); a rolling upgrade (upgrade_mode=rolling) to the new images under a running
job; upgrade.yml and scale.yml with the slurmctld pod gone; the dump restores; scale down refused / waiting / without ghost node; teardown
refused while a job runs, keeping the volumes, idempotent, then with teardown_delete_volumes removing
the claims of the volumeClaimTemplates too. Every Slurm-side step of the playbooks runs in the pods
through the kubernetes.core.kubectl connection.
The first test runs MPI on 24.11 (srun --mpi=pmix, which 26.05's Debian packages lack, and mpirun).
The images get tags of their own: day2-old is Slurm 24.11, day2-new and day2-newer Slurm 26.05 (two builds of
it with another version label, so another image id): the image upgrade crosses three major releases as
SchedMD's rule allows, slurmdbd converting the accounting database and slurmctld reading 24.11's state; a
way back to 24.11 (a downgrade) is refused before anything changes.
"""

from __future__ import annotations

import base64
import calendar
import gzip
import json
import os
import re
import time

import pytest

from tests.k8s.cluster import (CONFIG_CHECK_WRITES, FORK_FALLBACK, LOGIN_ENVIRONMENT_JOBS, SlurmOnKube,
                               assert_mpi_across_both_pods)
from tests.support.proc import wait_for

NAME = "day2"
OLD, NEW, NEWER = "day2-old", "day2-new", "day2-newer"
# the previous and the newest major the images build (images/slurm/slurm-majors)
OLD_MAJOR, NEW_MAJOR = "24.11", "26.05"
WINDOW = re.compile(r"maintenance window ([0-9.]+) s")
RELEASE = "/tmp/day2-release"
SCALE_RELEASE = "/tmp/day2-release-scale"


@pytest.fixture(scope="module")
def cluster(kube, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("day2")
    # slurm.conf mounted into every pod (the way before configless nodes) until the site.yml run with other
    # images switches to configless
    deployment = SlurmOnKube(kube, workdir, NAME, OLD, 30042, slurmd_cpus=1, cluster_configless=False,
                             upgrade_backup_dir=str(workdir / "backups"),
                             config_qos=[{"name": "short", "max_wall": "01:00:00", "max_jobs_per_user": 4}],
                             config_accounts=[{"name": "projx", "qos": ["normal", "short"], "default_qos": "normal"}])
    deployment.backup_dir = workdir / "backups"
    started = time.monotonic()
    # builds of their own: NEW and NEWER differ by their version label only, and a pod's status names its image
    # by the image ID's first name in containerd (a shared build's would be another module's tag)
    for tag, major in ((OLD, OLD_MAJOR), (NEW, NEW_MAJOR), (NEWER, NEW_MAJOR)):
        kube.build_and_load_images(tag, slurm_major=major, own_build=True)
    for name in ("slurm", "slurm-daemon"):
        assert len({kube.image_id("hpc-slurm-k8s/%s:%s" % (name, tag)) for tag in (OLD, NEW, NEWER)}) == 3
    deployment.timings["images_s"] = time.monotonic() - started
    kube.delete_namespace(deployment.namespace)
    _proc, changed, seconds = deployment.site()
    deployment.timings["site_s"] = seconds
    assert changed > 0
    deployment.wait_nodes({"slurmd-0": "idle", "slurmd-1": "idle"}, 90)
    yield deployment
    print("\nday2 timings: %s" % json.dumps({k: round(v, 1) for k, v in deployment.timings.items()}))
    if os.environ.get("KEEP_E2E") != "1":
        deployment.delete()


def images(cluster):
    """pod -> the image its (first) container runs, as the kubelet reports it."""
    return {name: pod["status"]["containerStatuses"][0]["image"]
            for name, pod in cluster.kube.pods(cluster.namespace).items() if not name.startswith("login-")}


def test_mpi_on_the_24_11_images_with_srun_and_mpirun(cluster):
    """24.11, the older major users may still choose: four MPI ranks over both workers with srun --mpi=pmix
    (its Debian packages have the PMIx plugin) and with mpirun in a batch job, before the upgrade to 26.05."""
    cluster.wait_for_login()   # a fresh NodePort: kube-proxy may forward it moments after the login pod is Ready
    assert_mpi_across_both_pods(cluster, OLD_MAJOR)


def test_the_modules_on_24_11(cluster):
    """The node and queue modules (drain, check mode, idempotence, the queue, resume what they drained) in the
    slurmctld pod: the playbook test_cluster.py runs on the default 26.05, here on 24.11."""
    cluster.run_modules(OLD_MAJOR)


def test_jobs_that_load_the_users_login_environment_on_24_11(cluster):
    """Jobs that make slurmd load alice's login environment (--export=NONE...) on 24.11's slurmd (test_cluster.py
    runs them on the default 26.05): each runs with it, and no slurmd container restarts (test_cluster.py says why
    they used to end every job on the node)."""
    restarts = {name: identity for name, identity in cluster.kube.pod_identity(cluster.namespace).items()
                if name.startswith("slurmd-")}
    assert cluster.jobs_with_the_users_login_environment("slurmd-1") == LOGIN_ENVIRONMENT_JOBS
    assert {name: identity for name, identity in cluster.kube.pod_identity(cluster.namespace).items()
            if name.startswith("slurmd-")} == restarts
    log = cluster.kube.kubectl("logs", "-n", cluster.namespace, "slurmd-1", "-c", "slurmd").stdout
    assert log.count(FORK_FALLBACK) >= len(LOGIN_ENVIRONMENT_JOBS), log[-3000:]


def test_a_noop_upgrade_drains_nothing_and_a_change_is_refused_while_a_job_runs(cluster):
    # runs until the test releases it (a file in its pod), however long the playbooks take here
    # a time limit, from which the upgrade computes when its maintenance window opens at the latest
    job = cluster.sbatch("-w", "slurmd-0", "-t", "10", "--wrap", "while [ ! -e %s ]; do sleep 0.5; done" % RELEASE)
    wait_for(lambda: cluster.job_state(job) == "RUNNING", 30, "job %s running" % job)
    before, pods = cluster.nodes(), cluster.kube.pod_identity(cluster.namespace)
    assert all("drain" not in s for s, _r in before.values()), before

    # nothing to roll out: nothing to drain for, so the running job is no reason to refuse
    position = cluster.kube.audit_position()
    proc, _changed, seconds = cluster.playbook("upgrade")
    cluster.timings["upgrade_noop_with_a_job_s"] = seconds
    assert "roles to roll out: none (nothing changes)" in proc.stdout
    assert "nothing to roll out: no node is drained and no pod is replaced; 1 active job(s) keep running" in proc.stdout
    assert "resumed no node;" in proc.stdout and "no maintenance window (nothing to roll out: no node was drained)" \
        in proc.stdout, proc.stdout[-3000:]
    assert cluster.nodes() == before and cluster.job_state(job) == "RUNNING"
    assert cluster.kube.pod_identity(cluster.namespace) == pods
    assert cluster.kube.writes_since(position, cluster.namespace) == []
    assert not list(cluster.backup_dir.glob("*.sql.gz")), "nothing changed in slurmdbd or the database: no dump"

    # a change to roll out (slurm.conf): the plan finds it, then the upgrade refuses before any change
    cluster.save(config_slurm_conf={"MaxJobCount": 23456})
    proc, _changed, seconds = cluster.playbook("upgrade", check=False)
    cluster.timings["upgrade_refused_s"] = seconds
    assert proc.returncode != 0
    assert "roles to roll out: config" in proc.stdout, proc.stdout[-3000:]
    assert "refused: 1 job(s) active (%s)" % job in proc.stdout and "Nothing was changed" in proc.stdout, proc.stdout[-3000:]
    assert cluster.nodes() == before and cluster.job_state(job) == "RUNNING"
    assert cluster.kube.writes_since(position, cluster.namespace) == []
    assert "23456" not in cluster.ctld("scontrol", "show", "config").stdout.split("MaxJobCount")[1].split("\n")[0]
    assert not list(cluster.backup_dir.glob("*.sql.gz")), "a refused upgrade must not even back up"
    cluster.running_job = job


def test_a_config_only_upgrade_waits_for_the_job_keeps_the_pending_one_and_restarts_nothing(cluster):
    """The slurm.conf change the previous test was refused: drained, the running job waited for, the
    change reconfigured with no pod restarted and no dump, the nodes resumed, the pending job run."""
    running = cluster.running_job
    pending = cluster.sbatch("-w", "slurmd-0", "-o", "/tmp/day2-%j.out", "--wrap", "hostname")
    wait_for(lambda: cluster.job_state(pending) == "PENDING", 10, "job %s pending" % pending)
    pods = cluster.kube.pod_identity(cluster.namespace)

    def release_job():
        # release the running job only once the upgrade has drained and is waiting for it
        time.sleep(5)
        cluster.kube.exec(cluster.namespace, "slurmd-0", "touch", RELEASE, container="slurmd")

    position = cluster.kube.audit_position()
    proc, changed, seconds = cluster.playbook(
        "upgrade", "-e", "upgrade_wait_for_jobs=true", "-e", "upgrade_wait_timeout=300",
        when_output=("TASK [hpc.slurm_k8s.upgrade : Wait for the active jobs to end", release_job))
    cluster.timings["upgrade_config_only_with_job_wait_s"] = seconds
    cluster.timings["window_config_only_incl_job_wait_s"] = float(WINDOW.search(proc.stdout).group(1))
    assert changed > 0 and "roles to roll out: config\"" in proc.stdout and "Reconfigure Slurm" in proc.stdout
    opens = re.search(r"1 running job\(s\) keep their nodes until they end, at the latest in ([0-9]+) s \(job %s reaches"
                      r" its time limit at [0-9T:-]+ by slurmctld's clock\)" % running, proc.stdout)
    assert opens and 0 < int(opens.group(1)) <= 600, proc.stdout[-3000:]
    waited = float(re.search(r"no active job \(waited ([0-9.]+) s\)", proc.stdout).group(1))
    assert waited > 1.5, "the upgrade did not wait for job %s" % running
    assert cluster.accounted_state(running) == ["COMPLETED"]
    assert "23456" in cluster.ctld("scontrol", "show", "config").stdout.split("MaxJobCount")[1].split("\n")[0]
    assert cluster.kube.pod_identity(cluster.namespace) == pods, "a pod was replaced or restarted"
    # written: the check pod in which each image's Slurm judged the new file first, the slurm.conf ConfigMap and
    # an annotation on each pod that mounts it (all but MariaDB's)
    written = {(w["verb"], w["objectRef"]["resource"], w["objectRef"].get("name"))
               for w in cluster.kube.writes_since(position, cluster.namespace)}
    assert written == CONFIG_CHECK_WRITES | {("patch", "configmaps", "slurm-config")} | {
        ("patch", "pods", pod) for pod in pods if not pod.startswith("mariadb-")}, written
    assert not list(cluster.backup_dir.glob("*.sql.gz")), "nothing changed in slurmdbd or the database: no dump"
    wait_for(lambda: cluster.accounted_state(pending) == ["COMPLETED"], 30, "pending job %s completed" % pending)
    assert set(s for s, _r in cluster.nodes().values()) == {"idle"}


def munge_secret(cluster):
    return cluster.kube.get("secret", "munge-key", cluster.namespace)


def sacct_history(cluster):
    """job id -> state of every job slurmdbd holds for the cluster (allocations only)."""
    out = cluster.ctld("sacct", "-n", "-X", "-a", "-P", "-S", "2020-01-01", "-o", "JobID,State").stdout
    return dict(line.split("|", 1) for line in out.splitlines() if line.strip())


def test_interrupted_upgrade_converges_admin_drain_stays_queued_job_keeps_its_id(cluster):
    """With a munge key rotation and new images: site.yml, and an upgrade apply phase that no pre phase
    came before, refuse the rotation before any change; the upgrade's pre phase drains, is interrupted; the re-run rotates the key and replaces every pod; an
    admin's drain stays, a queued job keeps its id and runs with the new key."""
    old_key = munge_secret(cluster)["data"]["munge.key"]
    before = cluster.kube.pod_identity(cluster.namespace)
    cluster.save(secrets_rotation={"munge": "day2"})
    proc, _changed, _seconds = cluster.site(check=False)
    assert proc.returncode != 0 and "munge: munge holds one key" in proc.stdout and "Nothing was changed" in proc.stdout, \
        proc.stdout[-3000:]
    # an apply phase run on its own (no pre phase drained the nodes): refused the same way
    proc, _changed, _seconds = cluster.playbook("upgrade", "-e", "upgrade_phase=apply", check=False)
    assert proc.returncode != 0 and "munge: munge holds one key" in proc.stdout \
        and "upgrade_phase=apply rotates it only after upgrade_phase=pre drained the nodes" in proc.stdout \
        and "Nothing was changed" in proc.stdout and "No node was drained (no upgrade_phase=pre ran" in proc.stdout, \
        proc.stdout[-3000:]
    assert munge_secret(cluster)["data"]["munge.key"] == old_key
    assert cluster.kube.pod_identity(cluster.namespace) == before
    cluster.ctld("scontrol", "update", "nodename=slurmd-1", "state=drain", "reason=admin: bad DIMM")
    cluster.playbook("upgrade", "-e", "upgrade_phase=pre")
    state = cluster.nodes()
    assert state["slurmd-0"][0] == "drain" and state["slurmd-0"][1] == "hpc.slurm_k8s:upgrade cluster upgrade"
    assert state["slurmd-1"] == ("drain", "admin: bad DIMM")
    # submitted while the nodes are drained: it must survive the pod replacements with its id
    queued = cluster.sbatch("-w", "slurmd-0", "--wrap", "hostname")
    assert cluster.job_state(queued) == "PENDING"
    # accounting must survive the upgrade as it is, also what no variable lists (the upgrade's own
    # converge would re-create the rest)
    cluster.ctld("sacctmgr", "-i", "add", "account", "legacy", "cluster=%s" % NAME)
    cluster.ctld("sacctmgr", "-i", "add", "user", "alice", "account=legacy", "cluster=%s" % NAME)
    accounting = cluster.associations("account,user,parentname,qos,defaultqos")
    assert {"projx||root|normal,short|normal", "legacy|alice||normal|", "users|alice||normal|"} <= accounting, accounting
    before = cluster.kube.pod_identity(cluster.namespace)
    history = sacct_history(cluster)
    assert cluster.running_job in history and queued in history
    # interrupted here; the re-run (now with the images of the newest major) converges
    proc, _changed, seconds = cluster.playbook("upgrade", "-e", "cluster_image_tag=%s" % NEW)
    cluster.timings["upgrade_image_s"] = seconds
    cluster.timings["window_image_after_interruption_s"] = float(WINDOW.search(proc.stdout).group(1))
    # the images' own versions were compared before the drain went on; slurmdbd converted the database
    # (waited for: sacctmgr answered after it), slurmctld read 24.11's state, every node reports 26.05
    assert re.search(r"Slurm %s\.[0-9]+ to %s\.[0-9]+ is 3 major release\(s\) up" % (OLD_MAJOR, NEW_MAJOR), proc.stdout), \
        proc.stdout[-3000:]
    converted = re.search(r"slurmdbd converted the accounting database to its schema in ([0-9.]+) s", proc.stdout)
    assert converted, proc.stdout[-3000:]
    cluster.timings["slurmdbd_conversion_s"] = float(converted.group(1))
    dbd_log = cluster.kube.kubectl("logs", "-n", cluster.namespace, "slurmdbd-0").stdout
    assert re.search(r"(adding|dropping) column .*%s_job_table" % NAME, dbd_log), dbd_log[-3000:]
    assert re.search(r"2 node\(s\) back with Slurm %s\.[0-9]+" % NEW_MAJOR, proc.stdout), proc.stdout[-3000:]
    assert "Recovered JobId=%s" % queued in cluster.kube.kubectl("logs", "-n", cluster.namespace, "slurmctld-0").stdout
    dumps = sorted(cluster.backup_dir.glob("*.sql.gz"))
    assert dumps, "no dump before slurmdbd's new major"
    cluster.timings["dump_bytes"] = dumps[-1].stat().st_size
    after = cluster.kube.pod_identity(cluster.namespace)
    for pod, image in images(cluster).items():
        if pod == "mariadb-0":
            continue
        assert image.endswith(":%s" % NEW), (pod, image)
        assert after[pod][0] != before[pod][0], "%s was not replaced" % pod
    state = cluster.nodes()
    assert state["slurmd-1"] == ("drain", "admin: bad DIMM"), "the admin's drain was lost: %s" % state
    assert "resumed slurmd-0;" in proc.stdout and "left drained: slurmd-1" in proc.stdout
    assert "rotating munge; every Slurm daemon restarts with the new munge key" in proc.stdout
    rotated = munge_secret(cluster)
    assert rotated["data"]["munge.key"] != old_key and rotated["metadata"]["annotations"]["hpc.slurm-k8s/rotation"] == "day2"
    assert base64.b64decode(old_key).decode() not in proc.stdout
    assert base64.b64decode(rotated["data"]["munge.key"]).decode() not in proc.stdout
    wait_for(lambda: cluster.accounted_state(queued) == ["COMPLETED"], 30, "queued job %s completed" % queued)
    assert cluster.associations("account,user,parentname,qos,defaultqos") == accounting, "accounting changed"
    # every job of the accounting history from before, with its id (the queued one has its end now)
    after = sacct_history(cluster)
    assert set(history) <= set(after) and all(after[job] == state for job, state in history.items() if job != queued), \
        (history, after)
    cluster.ctld("scontrol", "update", "nodename=slurmd-1", "state=resume")
    wait_for(lambda: set(s for s, _r in cluster.nodes().values()) == {"idle"}, 30, "both nodes idle")


def _when(timestamp):
    """Seconds since the epoch of an API server or sacct time stamp (UTC; the pods' local time is UTC)."""
    return calendar.timegm(time.strptime(timestamp.rstrip("Z"), "%Y-%m-%dT%H:%M:%S"))


def test_site_with_other_images_replaces_each_worker_after_its_jobs(cluster):
    """site.yml back to the 24.11 images is refused before anything changes (a downgrade); site.yml with another
    build of the new major, while a job runs on each worker: slurmdbd, slurmctld and login restart
    (running jobs go on: slurmctld's state survives); each slurmd pod is deleted by the collection (the
    StatefulSet is OnDelete), only once its node is drained and its job has ended, one pod at a time; an
    admin's drain stays; a held job keeps its id and runs afterwards. The same run switches the nodes from
    mounted files to configless (cluster_configless): slurmctld loads enable_configless before the first
    worker is replaced, and the new worker and login pods fetch the configuration from it."""
    release = {"slurmd-0": "/tmp/day2-rollout-0", "slurmd-1": "/tmp/day2-rollout-1"}
    jobs = {node: cluster.sbatch("-w", node, "--wrap", "while [ ! -e %s ]; do sleep 0.5; done" % path)
            for node, path in release.items()}
    for job in jobs.values():
        wait_for(lambda job=job: cluster.job_state(job) == "RUNNING", 30, "job %s running" % job)
    held = cluster.sbatch("--hold", "--wrap", "hostname")
    cluster.ctld("scontrol", "update", "nodename=slurmd-1", "state=drain", "reason=admin: fan noise")
    before = cluster.kube.pod_identity(cluster.namespace)

    def release_jobs():
        # once the rollout waits for the first node's job: the site.yml run above it went by meanwhile
        time.sleep(5)
        for node, path in release.items():
            cluster.kube.exec(cluster.namespace, node, "touch", path, container="slurmd")

    # back to 24.11: the image versions are compared after the cluster role's API checks, before any change
    position = cluster.kube.audit_position()
    cluster.save(cluster_image_tag=OLD)
    proc, _changed, _seconds = cluster.site(check=False)
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert re.search(r"refused: Slurm %s\.[0-9]+ to %s\.[0-9]+ is a downgrade" % (NEW_MAJOR, OLD_MAJOR), proc.stdout) \
        and "Nothing of Slurm was changed" in proc.stdout, proc.stdout[-3000:]
    # written: only the short-lived pod that ran both images' slurmctld -V
    written = {(w["verb"], w["objectRef"]["resource"], w["objectRef"].get("name"))
               for w in cluster.kube.writes_since(position, cluster.namespace)}
    assert written <= {("patch", "pods", "slurm-version-check"), ("create", "pods", "slurm-version-check"),
                       ("delete", "pods", "slurm-version-check")} and ("delete", "pods", "slurm-version-check") in written, written
    assert cluster.kube.pod_identity(cluster.namespace) == before
    assert all(image.endswith(":%s" % NEW) for pod, image in images(cluster).items() if pod != "mariadb-0")

    position = cluster.kube.audit_position()
    cluster.save(cluster_image_tag=NEWER, cluster_configless=True)
    proc, changed, seconds = cluster.playbook(
        "site", when_output=("TASK [hpc.slurm_k8s.slurmd : Drain, and wait until no job is left", release_jobs))
    cluster.timings["site_new_image_with_jobs_s"] = seconds
    assert changed > 0 and "replacing 2 pod(s) in 2 step(s) of at most 1" in proc.stdout, proc.stdout[-3000:]
    # slurm.conf with enable_configless loaded before the first drain
    reconfigured = proc.stdout.find("RUNNING HANDLER [hpc.slurm_k8s.config : Reconfigure Slurm]")
    assert 0 <= reconfigured < proc.stdout.find("TASK [hpc.slurm_k8s.slurmd : Drain, and wait until no job is left"), \
        proc.stdout[-3000:]
    assert "enable_configless" in cluster.ctld("scontrol", "show", "config").stdout.split("SlurmctldParameters")[1].split("\n")[0]
    # the jobs ran to their end on the old pods, with their ids
    for job in jobs.values():
        assert cluster.accounted_state(job) == ["COMPLETED"], job
    assert cluster.job_state(held) == "PENDING"
    pods = cluster.kube.pods(cluster.namespace, "app.kubernetes.io/name=slurmd")
    ready_at = {}
    for node, job in jobs.items():
        pod = pods[node]
        assert pod["status"]["containerStatuses"][0]["image"].endswith(":%s" % NEWER), node
        assert {"name": "SLURM_CONF_SERVER", "value": "slurmctld:6817"} in pod["spec"]["containers"][0]["env"], node
        assert '"slurm-config"' not in json.dumps(pod["spec"]["volumes"]), node
        assert pod["metadata"]["uid"] != before[node][0], "%s was not replaced" % node
        ended = cluster.ctld("sacct", "-n", "-X", "-j", job, "-o", "End%30").stdout.strip()
        assert _when(pod["metadata"]["creationTimestamp"]) >= _when(ended), (node, "replaced before its job ended")
        ready_at[node] = _when(next(c["lastTransitionTime"] for c in pod["status"]["conditions"] if c["type"] == "Ready"))
    # one at a time (slurmd_rollout_max_unavailable 1): the second pod was deleted after the first was ready again
    assert _when(pods["slurmd-1"]["metadata"]["creationTimestamp"]) >= ready_at["slurmd-0"]
    # the collection deleted each once
    deleted = sorted(w["objectRef"]["name"] for w in cluster.kube.writes_since(position, cluster.namespace)
                     if w["verb"] == "delete" and w["objectRef"]["resource"] == "pods"
                     and w["objectRef"]["name"].startswith("slurmd-"))
    assert deleted == ["slurmd-0", "slurmd-1"], deleted
    state = cluster.nodes()
    assert state["slurmd-1"] == ("drain", "admin: fan noise") and state["slurmd-0"][0] == "idle", state
    # a second run: nothing to replace, nothing changed
    _proc, changed, _seconds = cluster.site()
    assert changed == 0
    cluster.ctld("scontrol", "release", held)
    wait_for(lambda: cluster.accounted_state(held) == ["COMPLETED"], 60, "held job %s completed" % held)
    cluster.ctld("scontrol", "update", "nodename=slurmd-1", "state=resume")
    wait_for(lambda: set(s for s, _r in cluster.nodes().values()) == {"idle"}, 30, "both nodes idle")


def test_rolling_upgrade_keeps_scheduling_and_waits_for_each_workers_job(cluster):
    """upgrade.yml with upgrade_mode=rolling, to the new images while a job runs on slurmd-0: no
    whole-cluster drain and no refusal; slurmdbd and slurmctld restart under the running job; the idle
    worker is replaced first and takes a new job while slurmd-0 waits for its own; slurmd-0 is replaced
    only after its job ended."""
    release = "/tmp/day2-rolling-release"
    running = cluster.sbatch("-w", "slurmd-0", "--wrap", "while [ ! -e %s ]; do sleep 0.5; done" % release)
    wait_for(lambda: cluster.job_state(running) == "RUNNING", 30, "job %s running" % running)
    before = cluster.kube.pod_identity(cluster.namespace)
    late = {}

    def submit_and_release():
        # the rollout waits for slurmd-0's job: slurmd-1, replaced first, schedules meanwhile
        late["job"] = cluster.sbatch("-w", "slurmd-1", "--wrap", "hostname")
        wait_for(lambda: cluster.accounted_state(late["job"]) == ["COMPLETED"], 60, "a job on slurmd-1 during the rollout")
        cluster.kube.exec(cluster.namespace, "slurmd-0", "touch", release, container="slurmd")

    cluster.save(cluster_image_tag=NEW)
    proc, _changed, seconds = cluster.playbook(
        "upgrade", "-e", "upgrade_mode=rolling",
        when_output=("TASK [hpc.slurm_k8s.slurmd : Drain, and wait until no job is left (policy wait), on slurmd-0", submit_and_release))
    cluster.timings["upgrade_rolling_s"] = seconds
    assert "rolling upgrade: no node is drained now; 1 active job(s) keep running" in proc.stdout
    assert "replacing 2 pod(s) in 2 step(s) of at most 1: slurmd-1 -> slurmd-0" in proc.stdout, proc.stdout[-3000:]
    assert "no maintenance window (rolling upgrade" in proc.stdout
    assert cluster.accounted_state(running) == ["COMPLETED"]
    after = cluster.kube.pod_identity(cluster.namespace)
    for pod, image in images(cluster).items():
        if pod != "mariadb-0":
            assert image.endswith(":%s" % NEW) and after[pod][0] != before[pod][0], (pod, image)
    pod = cluster.kube.get("pod", "slurmd-0", cluster.namespace)
    ended = cluster.ctld("sacct", "-n", "-X", "-j", running, "-o", "End%30").stdout.strip()
    assert _when(pod["metadata"]["creationTimestamp"]) >= _when(ended), "slurmd-0 replaced before its job ended"
    assert set(s for s, _r in cluster.nodes().values()) == {"idle"} and sorted(cluster.nodes()) == ["slurmd-0", "slurmd-1"]
    assert re.search(r"node\(s\) back with Slurm %s\.[0-9]+" % NEW_MAJOR, proc.stdout)
    # as a user on the login node (slurmctld's NetworkPolicy admits only 6817: no srun I/O there). The upgrade
    # replaced the login pod (Recreate): kube-proxy forwards the NodePort to the new one moments after it is Ready
    cluster.wait_for_login()
    assert sorted(cluster.ssh("srun -N2 hostname").stdout.split()) == ["slurmd-0", "slurmd-1"]   # task order is not defined


def test_an_unreachable_slurmctld_stops_each_playbook_with_its_own_message(cluster):
    """With the slurmctld pod gone, upgrade.yml ends with its own UPGRADE STOPPED message (not Ansible's
    UNREACHABLE) and scale.yml with the same diagnosis; nothing is changed; site.yml brings it back."""
    cluster.kube.kubectl("-n", cluster.namespace, "scale", "statefulset/slurmctld", "--replicas=0")
    wait_for(lambda: cluster.kube.get("pod", "slurmctld-0", cluster.namespace, check=False) is None, 120,
             "the slurmctld pod to be gone")
    position = cluster.kube.audit_position()
    diagnosis = "the slurmctld pod %s/slurmctld-0 cannot be reached" % cluster.namespace
    proc, _changed, _seconds = cluster.playbook("upgrade", check=False)
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-3000:])
    assert "UPGRADE STOPPED while checking" in proc.stdout and diagnosis in proc.stdout, proc.stdout[-3000:]
    assert "Nothing was changed" in proc.stdout and "unreachable=0" in proc.stdout
    proc, _changed, _seconds = cluster.playbook("scale", check=False)
    assert proc.returncode == 2 and diagnosis in proc.stdout and "unreachable=0" in proc.stdout, proc.stdout[-3000:]
    assert cluster.kube.writes_since(position, cluster.namespace) == []
    _proc, changed, _seconds = cluster.site()
    assert changed > 0
    wait_for(lambda: set(s for s, _r in cluster.nodes().values()) == {"idle"}, 60, "both nodes idle")


def test_database_dump_restores(cluster):
    dumps = sorted(cluster.backup_dir.glob("slurm-day2-slurm_acct_db-*.sql.gz"))
    # one per image upgrade (slurmdbd changed), the rolling one too; none for the no-op and config-only
    # upgrades, nor for site.yml
    assert len(dumps) == 2 and all(re.search(r"-\d{8}T\d{6}Z\.sql\.gz$", d.name) for d in dumps)
    assert oct(dumps[-1].stat().st_mode & 0o777) == "0o600"
    sql = gzip.decompress(dumps[-1].read_bytes())
    assert b"Dump completed" in sql[-200:]
    cluster.maria("DROP DATABASE IF EXISTS restore_check; CREATE DATABASE restore_check")
    cluster.maria(stdin=sql.decode(), database="restore_check")
    count = "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema='%s'"
    restored, live = cluster.maria(count % "restore_check"), cluster.maria(count % "slurm_acct_db")
    assert int(restored) > 10 and restored == live
    assert int(cluster.maria("SELECT COUNT(*) FROM restore_check.day2_job_table")) >= 3
    cluster.maria("DROP DATABASE restore_check")


def test_scale_down_refused_then_waits_and_leaves_no_ghost(cluster):
    # runs until released (a file in its pod) once the scale-down waits for it: a fixed sleep raced the
    # playbook's queue read on a loaded machine
    job = cluster.sbatch("-w", "slurmd-1", "--wrap", "while [ ! -e %s ]; do sleep 0.5; done" % SCALE_RELEASE)
    wait_for(lambda: cluster.job_state(job) == "RUNNING", 30, "job %s running" % job)
    proc, _changed, _seconds = cluster.playbook("scale", "-e", "slurmd_replicas=1", check=False)
    assert proc.returncode != 0 and "refused: 1 job(s) active on slurmd-1 (%s)" % job in proc.stdout
    assert sorted(cluster.nodes()) == ["slurmd-0", "slurmd-1"] and "drain" not in cluster.nodes()["slurmd-1"][0]

    def release_job():
        cluster.kube.exec(cluster.namespace, "slurmd-1", "touch", SCALE_RELEASE, container="slurmd")

    proc, _changed, seconds = cluster.playbook(
        "scale", "-e", "slurmd_replicas=1", "-e", "scale_wait_for_jobs=true",
        when_output=("TASK [hpc.slurm_k8s.scale : Wait for the jobs on the nodes to remove", release_job))
    cluster.timings["scale_down_wait_s"] = seconds
    assert cluster.accounted_state(job) == ["COMPLETED"]
    assert sorted(cluster.nodes()) == ["slurmd-0"], "ghost node left: %s" % cluster.nodes()
    assert cluster.kube.get("pod", "slurmd-1", cluster.namespace, check=False) is None
    cluster.save(slurmd_replicas=1)


def test_teardown_refused_then_keeps_volumes_and_is_idempotent(cluster):
    # longer than any teardown run here (it is cancelled below): a 30 s job once ended before the queue was read
    job = cluster.sbatch("--wrap", "sleep 3600")
    wait_for(lambda: cluster.job_state(job) == "RUNNING", 30, "job %s running" % job)
    proc, _changed, _seconds = cluster.playbook("teardown", check=False)
    assert proc.returncode != 0 and "refused: 1 job(s) active (%s)" % job in proc.stdout
    assert cluster.job_state(job) == "RUNNING"
    cluster.ctld("scancel", job)
    wait_for(lambda: cluster.job_state(job) == "", 30, "job %s gone" % job)
    proc, changed, seconds = cluster.playbook("teardown")
    cluster.timings["teardown_s"] = seconds
    assert changed > 0
    assert cluster.kube.pods(cluster.namespace) == {}
    claims = sorted(c["metadata"]["name"] for c in cluster.kube.get("pvc", namespace=cluster.namespace)["items"])
    assert claims == ["data-mariadb-0", "home", "state-slurmctld-0"], claims
    secrets = [s["metadata"]["name"] for s in cluster.kube.get("secrets", namespace=cluster.namespace)["items"]]
    assert secrets == ["slurm-database"], secrets
    kept_message = re.search(r"kept: ([^(\"]*)", proc.stdout).group(1)
    assert sorted(kept_message.strip().split(", ")) == sorted(
        ["Namespace %s" % cluster.namespace, "Secret slurm-database"]
        + ["PersistentVolumeClaim %s" % claim for claim in claims]), kept_message
    proc, changed, _seconds = cluster.playbook("teardown")
    assert changed == 0 and "nothing left to delete" in proc.stdout


def test_teardown_with_delete_volumes_removes_the_claims_and_the_namespace(cluster):
    proc, changed, seconds = cluster.playbook("teardown", "-e", "teardown_delete_volumes=true")
    cluster.timings["teardown_volumes_s"] = seconds
    assert changed > 0 and "kept: nothing" in proc.stdout
    wait_for(lambda: cluster.kube.get("namespace", cluster.namespace, check=False) is None, 180,
             "namespace %s gone" % cluster.namespace)
    wait_for(lambda: not [pv for pv in cluster.kube.get("pv")["items"]
                          if (pv["spec"].get("claimRef") or {}).get("namespace") == cluster.namespace],
             120, "the volumes of the deleted claims gone")
