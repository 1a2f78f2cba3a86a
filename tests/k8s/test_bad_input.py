"""Tier T3: a kubeconfig that points nowhere, a context that does not exist, an API server that goes
away in the middle of a run: each stops site.yml with an error that names the step, and changes
nothing (before the first write) or nothing more (mid-run); the next run converges. Workers that no
node can hold: the rollout stops at the first, with the scheduler's reason. A job that outlives the
rollout's timeout stops it at that node; the requeue policy then converges. Through the API: another
instance in the namespace is refused, a deployed instance's missing Secret is not silently generated
again, and no run (check mode included) leaves key material in the controller's temp directory. A first
deployment whose slurmctld image runs a Slurm major the collection does not support is refused before
anything of Slurm is created, naming the supported majors. A new slurm.conf that an image's own Slurm refuses
is never applied."""

from __future__ import annotations

import json
import os
import re

import pytest

from tests.k8s.cluster import SMALL_REQUESTS, SlurmOnKube
from tests.support.apiproxy import Proxy, kubeconfig_to
from tests.support.kube import LOCALKUBE
from tests.support.proc import collection_version, run, wait_for


def key_material(tmpdir):
    """What a run left in its TMPDIR that holds SSH keys: the scratch directories of the secrets role, or any
    private key (the kubernetes client's discovery cache, k8srcp-*.json, is no key and stays)."""
    return [str(path) for path in tmpdir.rglob("*") if path.name.endswith(".slurm-k8s-ssh")
            or (path.is_file() and b"PRIVATE KEY" in path.read_bytes())]


@pytest.fixture(scope="module")
def deployment(kube, tmp_path_factory):
    tag = "%s-badinput" % collection_version()
    workdir = tmp_path_factory.mktemp("badinput")
    deployment = SlurmOnKube(kube, workdir, "badinput", tag, 30072)
    kube.build_and_load_images(tag)
    kube.delete_namespace(deployment.namespace)
    yield deployment
    if os.environ.get("KEEP_E2E") != "1":
        deployment.delete()


def test_a_kubeconfig_that_points_nowhere_changes_nothing(deployment):
    kube = deployment.kube
    position = kube.audit_position()
    deployment.save(cluster_kubeconfig=kubeconfig_to(kube, deployment.workdir / "nowhere.kubeconfig",
                                                     server="https://127.0.0.1:1"))
    proc, _changed, _seconds = deployment.site(check=False)
    assert proc.returncode != 0
    out = proc.stdout
    assert "TASK [hpc.slurm_k8s.cluster : Report that the Kubernetes API cannot be used]" in out, out[-3000:]
    assert "The Kubernetes API cannot be used (cluster_kubeconfig: '%s'" % deployment.variables["cluster_kubeconfig"] in out
    assert re.search(r"127\.0\.0\.1.{0,20}\b1\b.*[Cc]onnection refused", out), out[-3000:]
    assert "Nothing was changed" in out
    assert kube.writes_since(position, deployment.namespace) == []
    assert kube.get("namespace", deployment.namespace, check=False) is None


def test_a_context_that_does_not_exist_changes_nothing(deployment):
    kube = deployment.kube
    position = kube.audit_position()
    deployment.save(cluster_kubeconfig=str(kube.kubeconfig), cluster_context="no-such-context")
    proc, _changed, _seconds = deployment.site(check=False)
    assert proc.returncode != 0
    assert "cluster_context: 'no-such-context'" in proc.stdout and "no-such-context" in \
        proc.stdout.split("cluster_context: 'no-such-context'")[1], proc.stdout[-3000:]
    assert "Nothing was changed" in proc.stdout
    assert kube.writes_since(position, deployment.namespace) == []
    deployment.save(cluster_context="")


def test_an_api_that_goes_away_mid_run_stops_at_the_step_and_the_next_run_converges(deployment):
    kube = deployment.kube
    proxy = Proxy()
    deployment.save(cluster_kubeconfig=kubeconfig_to(kube, deployment.workdir / "proxy.kubeconfig",
                                                     server="https://127.0.0.1:%d" % proxy.port))
    proc, _changed, _seconds = deployment.playbook("site", check=False,
                                                   when_output=("TASK [Apply slurmctld]", proxy.stop))
    assert proc.returncode != 0
    out = proc.stdout
    assert "slurmctld: '" in out and "' failed:" in out, out[-4000:]
    assert "run the same playbook again once the cause is fixed" in out
    # nothing of slurmctld or later was created
    assert kube.get("statefulset", "slurmctld", deployment.namespace, check=False) is None
    assert kube.get("statefulset", "slurmd", deployment.namespace, check=False) is None
    assert kube.get("statefulset", "slurmdbd", deployment.namespace) is not None
    # the API is back: the same command converges
    deployment.save(cluster_kubeconfig=str(kube.kubeconfig))
    _proc, changed, _seconds = deployment.site()
    assert changed > 0
    assert deployment.pods_ready()
    deployment.wait_nodes({"slurmd-0": "idle", "slurmd-1": "idle"}, 90)


def test_workers_no_node_can_hold_fail_with_the_schedulers_reason(deployment):
    kube = deployment.kube
    before = kube.pods(deployment.namespace, selector="app.kubernetes.io/name=slurmd")
    # the default request is slurmd_cpus (2 here): with the cluster's other pods, more than the node's 2 CPUs
    deployment.save(slurmd_cpu_request="", cluster_wait_timeout=20)
    proc, _changed, _seconds = deployment.site(check=False)
    assert proc.returncode != 0
    out = proc.stdout
    # the StatefulSet is OnDelete: the rollout replaced one pod (slurmd_rollout_max_unavailable 1), whose
    # replacement cannot be scheduled, and stopped there, with the scheduler's reason
    stopped = re.search(r"ROLLOUT STOPPED at (slurmd-[01]): task 'Wait for the new pods to be ready with the new "
                        r"revision slurmd-[01]' failed: not reached within cluster_wait_timeout \(20 s\)", out)
    assert stopped, out[-4000:]
    assert re.search(r"Pods of the cluster that are not ready: %s \(not scheduled: 0/1 nodes are "
                     r"available: 1 Insufficient cpu" % stopped.group(1), out), out[-4000:]
    assert "kubectl -n %s describe pod NAME" % deployment.namespace in out
    # the other worker was not touched
    after = kube.pods(deployment.namespace, selector="app.kubernetes.io/name=slurmd")
    untouched = ({"slurmd-0", "slurmd-1"} - {stopped.group(1)}).pop()
    assert after[untouched]["metadata"]["uid"] == before[untouched]["metadata"]["uid"]
    # the next run with requests that fit converges
    deployment.save(slurmd_cpu_request=SMALL_REQUESTS["slurmd_cpu_request"], cluster_wait_timeout=600)
    _proc, changed, _seconds = deployment.site()
    assert changed > 0
    assert deployment.pods_ready()
    deployment.wait_nodes({"slurmd-0": "idle", "slurmd-1": "idle"}, 120)


def test_a_job_that_outlives_the_rollout_timeout_stops_it_and_the_requeue_policy_converges(deployment):
    """site.yml with a slurmd template change while a job runs on slurmd-0 past slurmd_rollout_wait_timeout:
    idle slurmd-1 is replaced first, then the run stops at slurmd-0, which stays drained with its job
    running on the old pod. The next run with slurmd_rollout_policy=requeue puts that job back in the queue
    (same id), replaces slurmd-0 and returns it to service, where the job runs again to its end."""
    kube = deployment.kube
    # (-w slurmd-0: the requeued job waits for the new slurmd-0; its second start ends at once)
    job = deployment.sbatch("--requeue", "-w", "slurmd-0", "--wrap",
                            'if [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ]; then exit 0; fi; sleep 900')
    try:
        wait_for(lambda: deployment.job_state(job) == "RUNNING", 60, "job %s running" % job)
        before = kube.pods(deployment.namespace, selector="app.kubernetes.io/name=slurmd")
        deployment.save(slurmd_cpu_request="60m", slurmd_rollout_wait_timeout=5)
        proc, _changed, _seconds = deployment.site(check=False)
        out = proc.stdout
        assert proc.returncode != 0, out[-3000:]
        assert "replacing 2 pod(s) in 2 step(s) of at most 1: slurmd-1 -> slurmd-0" in out, out[-3000:]
        assert "ROLLOUT STOPPED at slurmd-0: task 'Drain, and wait until no job is left (policy wait), on " \
               "slurmd-0' failed:" in out, out[-3000:]
        after = kube.pods(deployment.namespace, selector="app.kubernetes.io/name=slurmd")
        assert after["slurmd-1"]["metadata"]["uid"] != before["slurmd-1"]["metadata"]["uid"]
        assert after["slurmd-0"]["metadata"]["uid"] == before["slurmd-0"]["metadata"]["uid"]
        assert deployment.job_state(job) == "RUNNING"
        state, reason = deployment.nodes()["slurmd-0"]
        assert state == "drng" and reason.startswith("hpc.slurm_k8s:rollout"), (state, reason)
        assert deployment.nodes()["slurmd-1"][0] == "idle"

        deployment.save(slurmd_rollout_policy="requeue")
        proc, changed, _seconds = deployment.site()
        assert changed > 0
        assert "replacing 1 pod(s) in 1 step(s) of at most 1: slurmd-0" in proc.stdout, proc.stdout[-3000:]
        assert kube.pods(deployment.namespace, selector="app.kubernetes.io/name=slurmd")["slurmd-0"]["metadata"]["uid"] \
            != before["slurmd-0"]["metadata"]["uid"]
        # Slurm holds a requeued batch job for about two minutes (its begin time): not what is tested here
        deployment.ctld("scontrol", "update", "jobid=%s" % job, "starttime=now", check=False)
        wait_for(lambda: deployment.accounted_state(job) == ["COMPLETED"], 120, "job %s completed" % job)
        runs = deployment.ctld("sacct", "-n", "-X", "-D", "-j", job, "-o", "State").stdout.split()
        assert runs == ["REQUEUED", "COMPLETED"], runs
        deployment.wait_nodes({"slurmd-0": "idle", "slurmd-1": "idle"}, 60)
    finally:
        deployment.ctld("scancel", job, check=False)
        deployment.save(slurmd_rollout_policy="wait", slurmd_rollout_wait_timeout=3600)


def test_the_proceed_policy_replaces_a_busy_worker_at_once_and_names_the_job_it_ends(deployment):
    """site.yml with a slurmd template change and slurmd_rollout_policy=proceed while a job that may not
    be requeued runs on slurmd-1: the run names the job before it replaces that pod, does not wait for it,
    the job ends (it is not requeued) and both nodes return to service."""
    kube = deployment.kube
    job = deployment.sbatch("--no-requeue", "-w", "slurmd-1", "--wrap", "sleep 900")
    try:
        wait_for(lambda: deployment.job_state(job) == "RUNNING", 60, "job %s running" % job)
        before = kube.pods(deployment.namespace, selector="app.kubernetes.io/name=slurmd")
        deployment.save(slurmd_cpu_request="70m", slurmd_rollout_policy="proceed")
        proc, changed, seconds = deployment.site()
        deployment.timings["site_rollout_proceed_s"] = seconds
        assert changed > 0
        assert "slurmd_rollout_policy=proceed: job(s) %s on slurmd-1 end now with NODE_FAIL" % job in proc.stdout, \
            proc.stdout[-3000:]
        after = kube.pods(deployment.namespace, selector="app.kubernetes.io/name=slurmd")
        for pod in ("slurmd-0", "slurmd-1"):
            assert after[pod]["metadata"]["uid"] != before[pod]["metadata"]["uid"], "%s was not replaced" % pod
        wait_for(lambda: deployment.accounted_state(job) not in ([], ["RUNNING"]), 120, "job %s to end" % job)
        assert deployment.accounted_state(job) == ["NODE_FAIL"], deployment.accounted_state(job)
        runs = deployment.ctld("sacct", "-n", "-X", "-D", "-j", job, "-o", "State").stdout.split()
        assert "REQUEUED" not in runs, runs
        # slurmd-1 stays COMPLETING for the killed job until slurmctld learns that the new slurmd has no
        # such job: at its registration (usually within a minute), at the latest when slurmctld's purge pass
        # kills again a completing job older than MinJobAge (300 s here; the pass runs every 60 s). One CI
        # run under load waited past 60 s: wait for the final state as long as Slurm may take to reach it.
        deployment.wait_nodes({"slurmd-0": "idle", "slurmd-1": "idle"}, 420)
    finally:
        deployment.ctld("scancel", job, check=False)
        deployment.save(slurmd_rollout_policy="wait")


def test_another_instance_in_the_namespace_is_refused_and_nothing_is_written(deployment):
    kube = deployment.kube
    position = kube.audit_position()
    other = deployment.workdir / "other.json"
    other.write_text(json.dumps(dict(deployment.variables, cluster_name="other", cluster_namespace=deployment.namespace)))
    proc, _changed, _seconds = deployment.playbook("site", check=False, vars_file=other)
    assert proc.returncode != 0
    assert "Namespace %s belongs to the instance 'badinput' of hpc.slurm_k8s" % deployment.namespace in proc.stdout, \
        proc.stdout[-3000:]
    assert "this run is for the instance 'other' (cluster_name)" in proc.stdout
    assert kube.writes_since(position, deployment.namespace) == []


def test_check_mode_of_a_new_instance_leaves_no_key_material_behind(deployment, tmp_path):
    kube = deployment.kube
    position = kube.audit_position()
    fresh = deployment.workdir / "fresh.json"
    fresh.write_text(json.dumps(dict(deployment.variables, cluster_name="fresh")))
    proc, changed, _seconds = deployment.playbook("site", "--check", vars_file=fresh, env={"TMPDIR": str(tmp_path)})
    assert changed > 0   # what a first deploy would create, shown without creating it
    assert "TASK [hpc.slurm_k8s.secrets : Generate SSH host keys]" in proc.stdout
    assert "check mode: slurmctld would be deployed with hpc-slurm-k8s/slurm-daemon:%s; whether this collection and" \
        " Slurm support the Slurm versions of the images is checked at the real run" % deployment.tag in proc.stdout, \
        proc.stdout[-3000:]
    assert key_material(tmp_path) == []
    assert kube.writes_since(position, "slurm-fresh") == []


def test_a_missing_secret_of_the_deployed_instance_is_refused_and_restored(deployment, tmp_path):
    kube = deployment.kube
    secret = kube.get("secret", "ssh-host-keys", deployment.namespace)
    saved = deployment.workdir / "ssh-host-keys.json"
    # as a backup keeps it (kubectl get -o yaml): data, labels and annotations (the collection's digest among them)
    saved.write_text(json.dumps({"apiVersion": "v1", "kind": "Secret", "type": secret["type"], "data": secret["data"],
                                 "metadata": {key: secret["metadata"][key] for key in ("name", "labels", "annotations")}}))
    login = kube.pods(deployment.namespace, selector="app.kubernetes.io/name=login")
    kube.kubectl("-n", deployment.namespace, "delete", "secret", "ssh-host-keys")
    position = kube.audit_position()
    proc, _changed, _seconds = deployment.playbook("site", check=False, env={"TMPDIR": str(tmp_path)})
    assert proc.returncode != 0
    assert "The Secret(s) ssh-host-keys are missing, but instance 'badinput' is deployed in namespace %s" \
        % deployment.namespace in proc.stdout, proc.stdout[-3000:]
    assert 'secrets_regenerate (["ssh"])' in proc.stdout
    assert kube.writes_since(position, deployment.namespace) == []
    assert key_material(tmp_path) == []
    # restored from the copy, the next run changes nothing: the login pod keeps its host keys
    kube.kubectl("-n", deployment.namespace, "create", "-f", str(saved))
    _proc, changed, _seconds = deployment.site()
    assert changed == 0
    assert {pod["metadata"]["uid"] for pod in kube.pods(deployment.namespace, selector="app.kubernetes.io/name=login").values()} \
        == {pod["metadata"]["uid"] for pod in login.values()}


def _boot_time(deployment):
    return re.search(r"^BOOT_TIME\s*=\s*(.+)$", deployment.ctld("scontrol", "show", "config").stdout, re.M).group(1)


def test_a_slurm_conf_the_images_slurm_refuses_is_never_applied(deployment):
    """A deployed cluster's new slurm.conf is parsed by each image's own Slurm before it is applied
    (roles/config/tasks/check.yml): a value the parameter table cannot judge (SlurmctldDebug takes a level name,
    a string to the table) and a plugin the image lacks stop the run with Slurm's words, and nothing changes: the
    ConfigMap keeps the running slurm.conf, slurmctld is not reconfigured (a slurmctld in the foreground of its
    container would re-execute itself on the refused file and stop)."""
    kube = deployment.kube
    before = kube.get("configmap", "slurm-config", deployment.namespace)["data"]
    boot_time = _boot_time(deployment)
    position = kube.audit_position()
    proc, _changed, _seconds = deployment.site(
        "-e", json.dumps({"config_slurm_conf": {"SlurmctldDebug": "loud", "SchedulerType": "sched/nope"}}), check=False)
    assert proc.returncode != 0
    for text in ("refused: the Slurm of slurmctld_image (hpc-slurm-k8s/slurm-daemon:%s) does not accept the new"
                 " slurm.conf: slurm.conf: scontrol: error: Invalid SlurmctldDebug loud" % deployment.tag,
                 "slurm.conf: this image has no plugin sched/nope",
                 "the Slurm of slurmd_image (hpc-slurm-k8s/slurm:%s) does not accept the new slurm.conf" % deployment.tag,
                 "Nothing was changed: the ConfigMap slurm-config still holds the slurm.conf the cluster runs, and"
                 " Slurm was not reconfigured"):
        assert text in proc.stdout, (text, proc.stdout[-3000:])
    # the short-lived check pod, nothing else
    written = {(w["objectRef"]["resource"], w["objectRef"].get("name")) for w in kube.writes_since(position, deployment.namespace)}
    assert written <= {("pods", "slurm-config-check")} and ("pods", "slurm-config-check") in written, written
    assert kube.get("pods", namespace=deployment.namespace, selector="app.kubernetes.io/name=slurm-config-check")["items"] == []
    assert kube.get("configmap", "slurm-config", deployment.namespace)["data"] == before
    assert _boot_time(deployment) == boot_time


def test_a_slurm_conf_that_stops_slurmctld_is_taken_back_and_no_job_is_lost(deployment):
    """A new slurm.conf that the parameter table and both images' parsers accept can still stop slurmctld when the
    reconfigure re-executes it: JobSubmitPlugins=lua with no job_submit.lua (the plugin exists; its start fails).
    The run puts the files slurmctld ran back into the ConfigMap, starts it again on them, and fails with
    slurmctld's words (roles/config/tasks/restore.yml); the job running throughout goes on, the queued one keeps
    its id and runs, and the next run without the override finds nothing of Slurm's configuration to change."""
    kube = deployment.kube
    before = kube.get("configmap", "slurm-config", deployment.namespace)["data"]
    release = "/tmp/badinput-release"
    running = deployment.sbatch("-w", "slurmd-0", "--wrap", "while [ ! -e %s ]; do sleep 0.5; done" % release)
    try:
        wait_for(lambda: deployment.job_state(running) == "RUNNING", 60, "job %s running" % running)
        queued = deployment.sbatch("--dependency=afterany:%s" % running, "--wrap", "true")
        proc, _changed, seconds = deployment.site(
            "-e", json.dumps({"config_slurm_conf": {"JobSubmitPlugins": "lua"}}), check=False)
        deployment.timings["site_slurmctld_stopped_and_restored_s"] = seconds
        out = proc.stdout
        assert proc.returncode != 0, out[-3000:]
        for text in ("refused by slurmctld: the reconfigure re-executed it on the new Slurm configuration (slurm.conf),"
                     " and it stopped: ",
                     "failed to initialize job_submit plugin",
                     "The files slurmctld ran are back in the ConfigMap slurm-config, and slurmctld answers on them"
                     " again"):
            assert text in out, (text, out[-3000:])
        assert kube.get("configmap", "slurm-config", deployment.namespace)["data"] == before
        assert "lua" not in re.search(r"^JobSubmitPlugins\s*=(.*)$", deployment.ctld("scontrol", "show", "config").stdout,
                                      re.M).group(1)
        assert deployment.job_state(running) == "RUNNING" and deployment.job_state(queued) == "PENDING"
        kube.exec(deployment.namespace, "slurmd-0", "touch", release, container="slurmd")
        for job in (running, queued):
            wait_for(lambda job=job: deployment.accounted_state(job) == ["COMPLETED"], 120, "job %s completed" % job)
        proc, changed, _seconds = deployment.site()
        assert changed == 0 and "RUNNING HANDLER [hpc.slurm_k8s.config : Reconfigure Slurm]" not in proc.stdout, \
            proc.stdout[-3000:]
    finally:
        kube.exec(deployment.namespace, "slurmd-0", "touch", release, container="slurmd", check=False)
        deployment.ctld("scancel", running, check=False)


def image_that_says(deployment, tmp_path, image, daemon, version):
    """Our image `image` with `daemon -V` replaced by one that prints `slurm-wlm <version>`, loaded into the
    local Kubernetes (nothing else of the image changes: the version check runs only that)."""
    name = "hpc-slurm-k8s/%s:%s-says-%s" % (image, deployment.tag, version)
    build = tmp_path / name.replace("/", "_").replace(":", "_")
    build.mkdir()
    (build / "Dockerfile").write_text("FROM hpc-slurm-k8s/%s:%s\nRUN printf '#!/bin/sh\\necho slurm-wlm %s\\n' > %s\n"
                                      % (image, deployment.tag, version, daemon))
    run(["docker", "build", "-q", "-t", name, str(build)], timeout=300)
    run(LOCALKUBE + ["load-images", name], timeout=300)
    return name


def test_slurm_images_the_collection_or_slurm_do_not_support_are_refused_before_slurm_exists(deployment, tmp_path):
    """Images whose daemons say another Slurm version (ours with `-V` replaced), on a first deployment: site.yml
    reads the version of each image and stops before anything of Slurm exists, (1) for Slurm 27.05, naming the
    supported majors and the variable that accepts a newer one, with which (2) the check lets the run go on,
    (3) for a slurmd image newer than slurmctld's (the module's 26.05 beside a slurmctld that says 24.11),
    naming both variables and versions, and (4) for a burst group's image newer than slurmctld's, naming the
    group's variable, (5) for metrics with images that say 24.11, whose slurm.conf parser stops at MetricsType,
    and (6) for an override of a slurm.conf parameter that only 26.05 has (check_inputs lets it through: a
    cluster may run 26.05), judged against those images' 24.11."""
    kube = deployment.kube
    daemon_27 = image_that_says(deployment, tmp_path, "slurm-daemon", "/usr/sbin/slurmctld", "27.05.1")
    node_27 = image_that_says(deployment, tmp_path, "slurm", "/usr/sbin/slurmd", "27.05.1")
    daemon_24 = image_that_says(deployment, tmp_path, "slurm-daemon", "/usr/sbin/slurmctld", "24.11.5")
    node_24 = image_that_says(deployment, tmp_path, "slurm", "/usr/sbin/slurmd", "24.11.5")
    node = "hpc-slurm-k8s/slurm:%s" % deployment.tag
    older = {"slurmctld_image": daemon_24, "slurmdbd_image": daemon_24, "slurmd_image": node_24, "login_image": node_24}
    labels = json.loads(run(["docker", "image", "inspect", "--format", "{{json .Config.Labels}}",
                             "hpc-slurm-k8s/slurm-daemon:%s" % deployment.tag]).stdout)
    version = labels["io.github.hpc-slurm-k8s.slurm.version"].split("-", 1)[0]   # 26.05.5-1 -> 26.05.5
    namespace = "slurm-newer"
    kube.delete_namespace(namespace)

    def refused_before_slurm(images, *expected):
        variables = tmp_path / "newer.json"
        variables.write_text(json.dumps(dict(deployment.variables, cluster_name="newer", **images)))
        position = kube.audit_position()
        proc, _changed, _seconds = deployment.playbook("site", check=False, vars_file=variables)
        assert proc.returncode != 0
        for text in expected + ("Nothing of Slurm was created or changed",):
            assert text in proc.stdout, (text, proc.stdout[-3000:])
        # the Namespace (the cluster role's API check) and the pod that ran the images' -V, nothing else
        written = {(w["verb"], w["objectRef"]["resource"], w["objectRef"].get("name"))
                   for w in kube.writes_since(position, namespace)}
        assert {resource for _verb, resource, _name in written} <= {"namespaces", "pods"}, written
        assert {name for _verb, resource, name in written if resource == "pods"} == {"slurm-version-check"}, written
        assert kube.get("pods", namespace=namespace)["items"] == []
        return variables

    try:
        newer = {"slurmctld_image": daemon_27, "slurmdbd_image": daemon_27, "slurmd_image": node_27, "login_image": node_27}
        variables = refused_before_slurm(
            newer, "refused: slurmctld_image, slurmdbd_image (%s): Slurm 27.05.1 is newer than this collection supports"
            " (Slurm 24.11 to 26.05, tested on 24.11 and 26.05): its configuration has not been checked against Slurm"
            " 27.05's daemons" % daemon_27, "set slurmctld_allow_newer_major: true to deploy it anyway")

        # accepted: the check says so for each image and the run goes on (--tags cluster: no daemon is started from
        # an image that only pretends to be 27.05)
        proc, _changed, _seconds = deployment.playbook("site", "--tags", "cluster", "-e", "slurmctld_allow_newer_major=true",
                                                       vars_file=variables)
        assert proc.returncode == 0, proc.stdout[-3000:]
        for image in (daemon_27, node_27):
            assert "(%s): Slurm 27.05.1 is newer than this collection supports (Slurm 24.11 to 26.05, tested on 24.11" \
                " and 26.05); deployed anyway because slurmctld_allow_newer_major is true" % image in proc.stdout, \
                proc.stdout[-3000:]

        # slurmd newer than slurmctld: Slurm does not run that mix, though both majors are supported
        kube.delete_namespace(namespace)
        refused_before_slurm(
            dict(older, slurmd_image=node),
            "refused: slurmd_image (%s) runs Slurm %s and slurmctld_image (%s) Slurm 24.11.5:"
            " slurmd must not be newer than slurmctld" % (node, version, daemon_24))

        # (4) the same for a burst group's own image: its pods run slurmd, made later by slurm-k8s-power
        kube.delete_namespace(namespace)
        refused_before_slurm(
            dict(older, powersave_groups=[{"name": "gpu", "count": 1, "cpus": 1, "memory_mib": 512, "image": node}]),
            "refused: powersave_groups[gpu].image (%s) runs Slurm %s and slurmctld_image (%s)"
            " Slurm 24.11.5: burst-gpu must not be newer than slurmctld" % (node, version, daemon_24))

        # (5) metrics need Slurm 25.11 or newer in every image
        kube.delete_namespace(namespace)
        refused_before_slurm(
            dict(older, cluster_metrics_enabled=True),
            "refused: cluster_metrics_enabled needs Slurm 25.11 or newer in every Slurm image",
            "slurmctld_image, slurmdbd_image (%s) runs Slurm 24.11.5; slurmd_image, login_image (%s) runs Slurm 24.11.5"
            % (daemon_24, node_24))

        # (6) Slurm's own parameters of the images' major (plugins/plugin_utils/slurm_parameters.json)
        kube.delete_namespace(namespace)
        refused_before_slurm(
            dict(older, config_slurm_conf={"HealthCheckTimeout": 30}),
            "refused: the images run Slurm 24.11, whose configuration parser does not accept: config_slurm_conf key"
            " 'HealthCheckTimeout': is not a slurm.conf parameter of Slurm 24.11 (only of 26.05)")
    finally:
        kube.delete_namespace(namespace)
