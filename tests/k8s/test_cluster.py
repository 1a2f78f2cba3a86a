"""Tier T3: site.yml through the Kubernetes API of a real cluster, then real users, jobs and failures.

site.yml applies the cluster with kubernetes.core (server-side apply, readiness waits) into namespace
slurm-e2e; the StatefulSet and Deployment controllers, the scheduler, the kubelet, kube-proxy,
CoreDNS, kube-router (NetworkPolicy), Pod Security admission and the PodDisruptionBudget checks of
the eviction API all act on it for real. A user SSHes into the login pod through its NodePort on
127.0.0.1 and runs jobs; pods are deleted and come back; the collection's modules run in the
slurmctld pod through the kubernetes.core.kubectl connection; the API server's audit log shows that
a re-run writes nothing. The cluster authenticates with Slurm's own auth/slurm (cluster_auth_type slurm:
the key set projected into the Slurm pods, sackd on login); the clusters of the other T3 modules and of
Molecule run munge, the default. Its nodes are configless (the default): slurmd and login's sackd fetch the
configuration from slurmctld; test_day2.py starts with mounted files and switches.
"""

from __future__ import annotations

import base64
import json
import os
import re
import time

import pytest

from tests.k8s.cluster import (CONFIG_CHECK_WRITES, FORK_FALLBACK, LOGIN_ENVIRONMENT_JOBS, STATE_SAVE_LOCATION,
                               SlurmOnKube, assert_mpi_across_both_pods)
from tests.support.kube import default_slurm_major, images_of, slurm_majors
from tests.support.proc import collection_version, run, wait_for

NAME = "e2e"
SSH_PORT = 30032
PODS = ("mariadb-0", "slurmdbd-0", "slurmctld-0", "slurmd-0", "slurmd-1")
PROTECTED = ("mariadb-0", "slurmdbd-0", "slurmctld-0")     # and login: PodDisruptionBudgets
# the pods that mount the ConfigMap slurm-config: configless slurmd and login pods fetch it from slurmctld
CONFIG_READERS = ("slurmctld-", "slurmdbd-", "slurmrestd-")


@pytest.fixture(scope="module")
def cluster(kube, tmp_path_factory):
    tag = "%s-e2e" % collection_version()
    deployment = SlurmOnKube(kube, tmp_path_factory.mktemp("e2e"), NAME, tag, SSH_PORT,
                             cluster_slurmrestd_enabled=True, cluster_auth_type="slurm")
    started = time.monotonic()
    kube.build_and_load_images(tag)
    deployment.timings["images_s"] = time.monotonic() - started
    kube.delete_namespace(deployment.namespace)
    proc, changed, seconds = deployment.site()
    deployment.timings["site_first_run_s"] = seconds
    assert changed > 0
    deployment.first_run_output = proc.stdout
    yield deployment
    print("\ne2e timings: %s" % json.dumps({k: round(v, 1) for k, v in deployment.timings.items()}))
    if os.environ.get("KEEP_E2E") != "1":
        deployment.delete()


def login_pod(cluster):
    pods = cluster.kube.pods(cluster.namespace, "app.kubernetes.io/name=login")
    assert len(pods) == 1, pods.keys()
    return next(iter(pods))


def connect(cluster, pod, host, port, container=None):
    """'open' or the error a TCP connection from `pod` to host:port ends with."""
    code = ("import socket\ns = socket.socket(); s.settimeout(5)\n"
            "try:\n    s.connect((%r, %d)); print('open')\nexcept OSError as e:\n    print(type(e).__name__)" % (host, port))
    return cluster.kube.exec(cluster.namespace, pod, "python3", "-c", code, container=container).stdout.strip()


def test_every_pod_ready_and_nodes_idle(cluster):
    pods = cluster.kube.pods(cluster.namespace)
    names = sorted(name.rsplit("-", 2)[0] if name.startswith(("login-", "slurmrestd-")) else name for name in pods)
    assert names == sorted(PODS + ("login", "slurmrestd")), names
    assert all(cluster.kube.is_ready(pod) for pod in pods.values()), {n: p["status"]["phase"] for n, p in pods.items()}
    cluster.wait_nodes({"slurmd-0": "idle", "slurmd-1": "idle"}, 90)


def test_the_images_record_the_slurm_they_run(cluster):
    """The labels of both images name the exact Debian version of Slurm that build-images.sh resolved, the
    daemons in the pods are that version, and the apt pin that keeps derived images on it is in place. The
    first deployment read that version from the image before it created anything of Slurm, and said that the
    collection supports it."""
    major, suites = default_slurm_major(), slurm_majors()
    versions = {}
    for image in images_of(cluster.tag)[:2]:
        labels = json.loads(run(["docker", "image", "inspect", "--format", "{{json .Config.Labels}}", image]).stdout)
        versions[image] = labels["io.github.hpc-slurm-k8s.slurm.version"]
        assert labels["io.github.hpc-slurm-k8s.slurm.major"] == major, labels
        assert labels["io.github.hpc-slurm-k8s.debian.suite"] == suites[major], labels
        assert versions[image].startswith(major + "."), labels
    (version,) = set(versions.values())
    upstream = version.split("-", 1)[0]   # 24.11.5-4+deb13u1 -> 24.11.5
    for pod, daemon in (("slurmctld-0", "slurmctld"), ("slurmd-0", "slurmd")):
        out = cluster.kube.exec(cluster.namespace, pod, "sh", "-c",
                                "%s -V; cat /etc/apt/preferences.d/hpc-slurm-k8s-slurm" % daemon, container=daemon).stdout
        assert "slurm-wlm %s\n" % upstream in out and "Pin: version %s\n" % version in out, out
    # each image read once (slurmrestd is enabled here), named with the variables of the components that run it
    node_image, daemon_image = images_of(cluster.tag)[:2]
    for names, image in (("slurmctld_image, slurmdbd_image, slurmrestd_image", daemon_image),
                         ("slurmd_image, login_image", node_image)):
        assert "%s (%s): Slurm %s: this collection supports Slurm 24.11 to 26.05, tested on 24.11 and 26.05" \
            % (names, image, upstream) in cluster.first_run_output, cluster.first_run_output[-3000:]


def test_second_run_changes_nothing_and_writes_nothing(cluster):
    position = cluster.kube.audit_position()
    _proc, changed, seconds = cluster.site()
    cluster.timings["site_second_run_s"] = seconds
    writes = cluster.kube.writes_since(position, cluster.namespace)
    assert changed == 0
    assert writes == [], ["%s %s" % (w["verb"], w["requestURI"]) for w in writes]


def test_the_namespace_enforces_pod_security_baseline(cluster):
    labels = cluster.kube.get("namespace", cluster.namespace)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    # every pod of the cluster was admitted under it (above); a privileged one is not
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "psa-check", "namespace": cluster.namespace},
           "spec": {"containers": [{"name": "c", "image": "hpc-slurm-k8s/slurm:%s" % cluster.tag,
                                    "securityContext": {"privileged": True}}]}}
    proc = cluster.kube.kubectl("apply", "-f", "-", input=json.dumps(pod), check=False)
    assert proc.returncode != 0 and 'violates PodSecurity "baseline:latest"' in proc.stderr, proc.stderr


def test_user_jobs_over_ssh_and_accounting(cluster):
    hosts = cluster.ssh("srun -N2 hostname").stdout.split()
    assert sorted(hosts) == ["slurmd-0", "slurmd-1"]
    job = cluster.ssh("sbatch --parsable --wait -N1 -o /home/alice/e2e-%j.out --wrap 'hostname; id -un'").stdout.strip()
    assert cluster.ssh("cat /home/alice/e2e-%s.out" % job).stdout.split()[1] == "alice"
    # sacct on the login node, as users run it (it asks slurmdbd directly)
    wait_for(lambda: cluster.ssh("sacct -n -X -j %s -o State" % job).stdout.split() == ["COMPLETED"], 30,
             "job %s COMPLETED in sacct" % job)


def test_mpi_across_two_pods(cluster):
    """Four MPI ranks over both worker pods, as alice, with mpirun in a batch job (Open MPI's launcher starts
    its daemons through srun), the launch of the default 26.05 image; srun --mpi=pmix where the image's
    Slurm has the PMIx plugin: Debian's 26.05 has not (Debian removed it: bug #1149781), which this asserts,
    so that the day it comes back the test says so (24.11's is run in test_day2.py, on its 24.11 cluster)."""
    assert_mpi_across_both_pods(cluster, default_slurm_major())


def test_network_policies_are_enforced(cluster):
    """kube-router enforces the NetworkPolicies: only slurmdbd and labelled clients reach MariaDB,
    a pod that is not part of the cluster reaches no daemon (srun and MPI above pass through them)."""
    login = login_pod(cluster)
    assert connect(cluster, login, "mariadb", 3306) == "ConnectionRefusedError"
    assert connect(cluster, "slurmd-0", "mariadb", 3306, container="slurmd") == "ConnectionRefusedError"
    assert connect(cluster, "slurmdbd-0", "mariadb", 3306, container="slurmdbd") == "open"
    # login and workers reach slurmdbd: sacct and sacctmgr talk to it directly
    assert connect(cluster, login, "slurmdbd", 6819) == "open"
    labels = cluster.kube.get("pod", "slurmdbd-0", cluster.namespace)["metadata"]["labels"]
    outsider = {"app.kubernetes.io/part-of": "slurm", "app.kubernetes.io/instance": labels["app.kubernetes.io/instance"]}
    for name, extra in (("outsider", {}), ("db-client", {"hpc.slurm-k8s/database-client": "true"})):
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": cluster.namespace,
                            "labels": dict(outsider if extra else {}, **extra)},
               "spec": {"containers": [{"name": "c", "image": "hpc-slurm-k8s/slurm:%s" % cluster.tag,
                                        "imagePullPolicy": "IfNotPresent", "command": ["sleep", "600"],
                                        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}},
                                        "securityContext": {"allowPrivilegeEscalation": False, "runAsUser": 1000,
                                                            "capabilities": {"drop": ["ALL"]}}}],
                        "terminationGracePeriodSeconds": 0}}
        cluster.kube.kubectl("apply", "-f", "-", input=json.dumps(pod))
    try:
        wait = cluster.kube.kubectl("wait", "--for=condition=Ready", "pod/outsider", "pod/db-client",
                                    "-n", cluster.namespace, "--timeout=180s", check=False, timeout=240)
        assert wait.returncode == 0, cluster.kube.kubectl("get", "events", "-n", cluster.namespace, check=False).stdout[-3000:]
        for host, port in (("mariadb", 3306), ("slurmctld", 6817), ("slurmdbd", 6819)):
            assert connect(cluster, "outsider", host, port) == "ConnectionRefusedError", (host, port)
        # kube-router applies a new pod's rules within its sync; the final state is what counts
        wait_for(lambda: connect(cluster, "db-client", "mariadb", 3306) == "open", 60, "db-client to reach mariadb")
    finally:
        cluster.kube.kubectl("delete", "pod", "outsider", "db-client", "-n", cluster.namespace, "--wait=false")


def test_network_policies_off_and_on_again_write_only_the_policies(cluster):
    """cluster_network_policies is applied in one place for every role (the resources role): turned off,
    site.yml deletes exactly the cluster's NetworkPolicies and writes nothing else; turned on again, it
    creates exactly those; no pod is replaced or restarted by either."""
    def policies():
        return {item["metadata"]["name"] for item in cluster.kube.get("networkpolicy", namespace=cluster.namespace)["items"]}

    def written(position):
        return {(w["verb"], w["objectRef"]["resource"], w["objectRef"].get("name"))
                for w in cluster.kube.writes_since(position, cluster.namespace)}

    def daemons():  # (the previous test's probe pods may still be terminating)
        return {name: pod for name, pod in cluster.kube.pod_identity(cluster.namespace).items()
                if name not in ("outsider", "db-client")}

    before, pods = policies(), daemons()
    assert {"slurmctld", "slurmdbd", "slurmd", "login", "mariadb"} <= before
    position = cluster.kube.audit_position()
    cluster.save(cluster_network_policies=False)
    try:
        _proc, changed, _seconds = cluster.site()
        assert changed > 0 and policies() == set()
        assert written(position) == {("delete", "networkpolicies", name) for name in before}
    finally:
        cluster.save(cluster_network_policies=True)
    position = cluster.kube.audit_position()
    _proc, changed, _seconds = cluster.site()
    assert changed > 0 and policies() == before
    assert written(position) == {("patch", "networkpolicies", name) for name in before}
    assert daemons() == pods, "a pod was replaced or restarted"


def test_a_deleted_slurmd_pod_comes_back_as_its_node(cluster):
    cluster.kube.replace_pod(cluster.namespace, "slurmd-1")
    cluster.wait_nodes({"slurmd-0": "idle", "slurmd-1": "idle"}, 120)
    assert cluster.ssh("srun -w slurmd-1 hostname").stdout.strip() == "slurmd-1"


def test_a_recreated_slurmctld_pod_keeps_pending_jobs_and_node_state(cluster):
    held = cluster.ssh("sbatch --parsable --hold --wrap 'true'").stdout.strip()
    cluster.ctld("scontrol", "update", "nodename=slurmd-1", "state=drain", "reason=e2e restart check")
    cluster.kube.replace_pod(cluster.namespace, "slurmctld-0")
    wait_for(lambda: "UP" in cluster.ctld("scontrol", "ping", check=False).stdout, 90, "slurmctld back")
    state = cluster.ctld("squeue", "-h", "-j", held, "-o", "%T %r").stdout.split()
    assert state[0] == "PENDING" and "Held" in state[1], state
    node = cluster.ctld("scontrol", "show", "node", "-o", "slurmd-1").stdout
    assert "DRAIN" in node and "e2e restart check" in node
    cluster.ctld("scancel", held)
    cluster.ctld("scontrol", "update", "nodename=slurmd-1", "state=resume")
    cluster.wait_nodes({"slurmd-0": "idle", "slurmd-1": "idle"}, 60)


def test_a_killed_slurmctld_starts_again_with_every_job_even_before_its_first_checkpoint(cluster):
    """SIGKILL to slurmctld (the OOM killer's way: no shutdown, no last save): the kubelet restarts its container
    on the same state volume, and the running and the held job keep their ids, states and node. The kill is made
    as one in slurmctld's first five minutes leaves the volume (assoc_usage not written yet: slurmctld writes it at
    its 300 s checkpoint), which Slurm 26.05 refuses to start on once the cluster has run ("No Assoc usage file
    to recover", restart after restart): the entrypoint moves clustername aside for that start
    (images/slurm/slurmctld-state.sh), and slurmctld writes it again with the cluster id slurmdbd gives it."""
    clustername = cluster.ctld("cat", "%s/clustername" % STATE_SAVE_LOCATION).stdout.strip()
    running = cluster.ssh("sbatch --parsable -w slurmd-0 -o /dev/null --wrap 'sleep 900'").stdout.strip()
    held = cluster.ssh("sbatch --parsable --hold -o /dev/null --wrap true").stdout.strip()
    wait_for(lambda: cluster.job_state(running) == "RUNNING", 90, "job %s running" % running)
    acknowledged = time.time()
    # slurmctld saves jobs at most 5 s after a change: a job acknowledged and killed within that is Slurm's loss
    wait_for(lambda: cluster.job_state_saved_since(acknowledged), 60, "slurmctld's job_state saved after both jobs")
    restarts = cluster.kube.pod_identity(cluster.namespace)["slurmctld-0"]
    cluster.sigkill_slurmctld(forget=("assoc_usage",))
    wait_for(lambda: cluster.kube.pod_identity(cluster.namespace)["slurmctld-0"][1] > restarts[1], 120,
             "the kubelet restarting slurmctld's container")
    wait_for(lambda: "UP" in cluster.ctld("scontrol", "ping", check=False).stdout, 180, "slurmctld answering again")
    assert cluster.kube.pod_identity(cluster.namespace)["slurmctld-0"][0] == restarts[0], "the pod was replaced"
    log = cluster.kube.kubectl("logs", "-n", cluster.namespace, "slurmctld-0", "-c", "slurmctld").stdout
    # (the other files of the checkpoint are missing too when the cluster is younger than five minutes)
    assert "clustername moved aside for this start" in log and re.search(r"never saved [a-z_ ]*assoc_usage", log), log[-3000:]
    assert cluster.ctld("squeue", "-h", "-j", running, "-o", "%T %N").stdout.split() == ["RUNNING", "slurmd-0"]
    state = cluster.ctld("squeue", "-h", "-j", held, "-o", "%T %r").stdout.split()
    assert state[0] == "PENDING" and "Held" in state[1], state
    # written again by slurmctld, with the id slurmdbd holds for the cluster: the same as before
    wait_for(lambda: cluster.ctld("cat", "%s/clustername" % STATE_SAVE_LOCATION, check=False).stdout.strip() == clustername,
             60, "clustername %r written again" % clustername)
    cluster.ctld("scancel", running, held)
    cluster.wait_nodes({"slurmd-0": "idle", "slurmd-1": "idle"}, 120)
    # both in accounting, once each (a job id handed out twice would show two records)
    # ("CANCELLED by 0", cut to sacct's column)
    wait_for(lambda: [cluster.accounted_state(job) for job in (running, held)] == [["CANCELLED+"], ["CANCELLED+"]], 120,
             "jobs %s and %s CANCELLED in sacct, once each" % (running, held))


def test_modules_through_the_kubectl_connection(cluster):
    cluster.run_modules(default_slurm_major())


def test_slurm_conf_change_is_applied_by_reconfigure_without_restart(cluster):
    """Configless nodes (the default): slurmd and login mount no slurm.conf, and slurmctld pushes a change to
    them with the reconfigure. MaxJobCount (slurmctld's) and SlurmdDebug (each slurmd's) changed: slurmctld shows
    the one, every running slurmd reports the other as soon as the run ends (the handler verified each node), login's sackd holds the new file, and
    no Slurm pod restarts; the kubelets of slurmd and login are not asked to refresh anything."""
    login = login_pod(cluster)
    for pod in ("slurmd-0", "slurmd-1", login):
        volumes = json.dumps(cluster.kube.get("pod", pod, cluster.namespace)["spec"]["volumes"])
        assert '"slurm-config"' not in volumes, (pod, volumes)
    assert "enable_configless" in cluster.ctld("scontrol", "show", "config").stdout.split("SlurmctldParameters")[1].split("\n")[0]
    assert set(cluster.slurmd_debug_levels().values()) == {"3"}   # info
    before = cluster.kube.pod_identity(cluster.namespace)
    position = cluster.kube.audit_position()
    cluster.save(config_slurm_conf={"MaxJobCount": 12345, "SlurmdDebug": "debug"})
    proc, changed, seconds = cluster.site()
    cluster.timings["site_reconfigure_run_s"] = seconds
    assert changed > 0 and "Reconfigure Slurm" in proc.stdout
    assert "12345" in cluster.ctld("scontrol", "show", "config").stdout.split("MaxJobCount")[1].split("\n")[0]
    # the handler waited for every slurmd to register again after the reconfigure (its SlurmdStartTime moved):
    # each one runs the new level as the run ends, with no wait here
    assert "Wait until every slurmd reached by the reconfigure has registered again" in proc.stdout
    levels = cluster.slurmd_debug_levels()
    assert set(levels.values()) == {"5"}, "a slurmd runs the old SlurmdDebug after the run: %s" % levels
    cached = cluster.kube.exec(cluster.namespace, login, "cat", "/run/slurm/conf/slurm.conf", container="login").stdout
    assert "SlurmdDebug=debug" in cached and "MaxJobCount=12345" in cached, cached
    after = cluster.kube.pod_identity(cluster.namespace)

    def daemons(pods):
        return {name: identity for name, identity in pods.items() if not name.startswith("slurmrestd-")}
    assert daemons(after) == daemons(before), "a Slurm pod was replaced or restarted"
    # slurmrestd reads slurm.conf only at start: its Deployment rolls (a new pod Ready before the old goes)
    assert set(after) - set(daemons(after)) != set(before) - set(daemons(before)), "slurmrestd kept its old slurm.conf"
    # the only objects written: the check pod in which each image's Slurm judged the new file first, the slurm.conf
    # ConfigMap, an annotation on each pod that mounts it (their kubelets refresh the files at once), and
    # slurmrestd's pod template (its checksum)
    written = {(w["verb"], w["objectRef"]["resource"], w["objectRef"].get("name")) for w in cluster.kube.writes_since(position, cluster.namespace)}
    assert written == CONFIG_CHECK_WRITES | {("patch", "configmaps", "slurm-config"), ("patch", "deployments", "slurmrestd")} | {
        ("patch", "pods", pod) for pod in before if pod.startswith(CONFIG_READERS)}, written


def test_other_config_files_alone_reconfigure_without_restart(cluster):
    """Every file of the Slurm ConfigMap acts, not only slurm.conf: cgroup.conf and an extra file (mpi.conf)
    changed, slurm.conf not, Slurm is reconfigured (24.11 re-executes slurmctld and each slurmd, which re-read
    every file) and slurmctld shows mpi.conf's new value; a job running throughout goes on, no pod restarts.
    (cgroup.conf's values are not shown while CgroupPlugin=disabled: the reconfigure is what is seen.)"""
    before = cluster.kube.pod_identity(cluster.namespace)
    job = cluster.sbatch("-N2", "-o", "/dev/null", "--wrap", "srun -N2 sleep 300")
    wait_for(lambda: cluster.job_state(job) == "RUNNING", 60, "job %s to run" % job)
    cluster.save(config_cgroup_conf={"MaxRAMPercent": 95}, config_extra_files={"mpi.conf": "PMIxDebug=1\n"})
    try:
        proc, changed, _seconds = cluster.site()
        assert changed > 0 and "cgroup.conf, mpi.conf changed (" in proc.stdout, proc.stdout[-3000:]
        assert "RUNNING HANDLER [hpc.slurm_k8s.config : Reconfigure Slurm]" in proc.stdout
        shown = cluster.ctld("scontrol", "show", "config").stdout
        # mpi.conf's values are shown with the mpi/pmix plugin only: Debian's 26.05 has none
        if "pmix" in cluster.ssh("srun --mpi=list").stdout.split():
            assert re.search(r"^PMIxDebug\s*=\s*1$", shown, re.M), shown[-1500:]
        assert cluster.job_state(job) == "RUNNING"
        assert cluster.kube.pod_identity(cluster.namespace) == before, "a configuration change replaced or restarted a pod"
    finally:
        cluster.save(config_cgroup_conf={}, config_extra_files={})
        cluster.ctld("scancel", job, check=False)
    cluster.site()
    if "pmix" in cluster.ssh("srun --mpi=list").stdout.split():
        assert re.search(r"^PMIxDebug\s*=\s*0$", cluster.ctld("scontrol", "show", "config").stdout, re.M)


def slurmd_start_time(cluster, node):
    return re.search(r"SlurmdStartTime=(\S+)", cluster.ctld("scontrol", "show", "node", node).stdout).group(1)


def test_jobs_that_load_the_users_login_environment_run_and_end_no_other_job(cluster):
    """sbatch --export=NONE, --export=VAR (no ALL) and --get-user-env make slurmd load the user's login
    environment (`su - alice`). Slurm does that in a child cloned into new PID and mount namespaces, which a
    pod without CAP_SYS_ADMIN may not create: slurmd exited ("fatal: clone: Operation not permitted") and the
    container's restart ended every job on the node. The image preloads a library into slurmd that makes it
    take Slurm's own fork path (images/slurm/slurmd-ns-fallback.c). Each job gets alice's ~/.profile and the
    submitter's variables as its option says, the library stays out of the jobs, a job running beside them
    on the node goes on, no container restarts; again after a reconfigure, where slurmd re-executes itself."""
    node = "slurmd-0"
    before = cluster.kube.pod_identity(cluster.namespace)
    log_before = cluster.kube.kubectl("logs", "-n", cluster.namespace, node, "-c", "slurmd").stdout
    assert "this container may not create PID and mount namespaces: slurmd loads users' login environments by fork" \
        in log_before, log_before[:2000]
    beside = cluster.ssh("sbatch --parsable -w %s -o /dev/null --wrap 'sleep 600'" % node).stdout.strip()
    try:
        wait_for(lambda: cluster.job_state(beside) == "RUNNING", 60, "job %s to run on %s" % (beside, node))
        assert cluster.jobs_with_the_users_login_environment(node) == LOGIN_ENVIRONMENT_JOBS
        started = slurmd_start_time(cluster, node)
        cluster.ctld("scontrol", "reconfigure")
        wait_for(lambda: slurmd_start_time(cluster, node) != started, 60, "slurmd on %s to re-execute itself" % node)
        assert cluster.jobs_with_the_users_login_environment(node, ["--export=NONE"]) == \
            {"--export=NONE": LOGIN_ENVIRONMENT_JOBS["--export=NONE"]}
        assert cluster.job_state(beside) == "RUNNING"
        assert cluster.kube.pod_identity(cluster.namespace) == before, "a pod was replaced or its container restarted"
        log = cluster.kube.kubectl("logs", "-n", cluster.namespace, node, "-c", "slurmd").stdout
        assert log.count(FORK_FALLBACK) - log_before.count(FORK_FALLBACK) == len(LOGIN_ENVIRONMENT_JOBS) + 1, log[-3000:]
        assert "fatal" not in log, log[-3000:]
    finally:
        cluster.ctld("scancel", beside, check=False)
    # cancelled (sacct's "CANCELLED by 0", cut to its column), not ended by a node failure
    wait_for(lambda: cluster.accounted_state(beside)[:1] == ["CANCELLED+"], 30,
             "job %s CANCELLED in sacct (last: %s)" % (beside, cluster.accounted_state(beside)))


def test_users_and_keys_change_without_restarting_a_pod_or_a_job(cluster):
    """Adding a user, changing their key and removing them restart no pod: every pod reads passwd, group and
    the keys from the users ConfigMap at each lookup, and site.yml makes the kubelets refresh the files at
    once (a pod annotation). A job holding both slurmd nodes runs throughout and completes with its id; a
    user who still owns a job is not removed."""
    alice_only = cluster.variables["config_users"]
    before = cluster.kube.pod_identity(cluster.namespace)
    release = "/home/alice/release-%d" % time.time_ns()
    held = cluster.ssh("sbatch --parsable -N2 -o /dev/null --wrap 'srun -N2 sh -c \"while [ ! -e %s ]; do sleep 1; done\"'"
                       % release).stdout.strip()
    wait_for(lambda: cluster.job_state(held) == "RUNNING", 60, "job %s to run on both nodes" % held)
    bob_keys = []
    for n in (1, 2):
        key = cluster.workdir / ("bob_%d" % n)
        if not key.exists():
            run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "bob-%d" % n, "-f", key])
        bob_keys.append(key)

    def bob(command, key, check=False):
        return cluster.ssh(command, user="bob", key=key, check=check, timeout=60)

    def bob_can_srun(key):
        proc = bob("srun -N1 id -u", key)
        return proc.returncode == 0 and proc.stdout.split() == ["2002"]

    try:
        # a new user: can log in and run a job as soon as site.yml ends
        position = cluster.kube.audit_position()
        cluster.save(config_users=alice_only + [{"name": "bob", "uid": 2002, "authorized_keys": [
            bob_keys[0].with_suffix(".pub").read_text().strip()]}])
        started = time.monotonic()
        proc, changed, seconds = cluster.site()
        cluster.timings["site_user_added_s"] = seconds
        assert changed > 0 and "Propagate the users to the running pods" in proc.stdout
        wait_for(lambda: bob_can_srun(bob_keys[0]), 60, "bob's first ssh + srun")
        cluster.timings["user_added_to_first_srun_s"] = time.monotonic() - started
        assert bob("stat -c '%u %a' $HOME", bob_keys[0], check=True).stdout.split() == ["2002", "700"]
        # (alice's home, made by the entrypoint when the pods started, is private too)
        assert cluster.ssh("stat -c '%u %a' $HOME").stdout.split() == ["2001", "700"]
        assert cluster.ctld("sacctmgr", "--noheader", "--parsable2", "show", "user", "bob", "format=user,defaultaccount"
                            ).stdout.split() == ["bob|users"]
        # the only writes: the users ConfigMap, and an annotation on each pod that mounts it (all but MariaDB's;
        # metadata only: no restart)
        written = {(w["verb"], w["objectRef"]["resource"], w["objectRef"].get("name"))
                   for w in cluster.kube.writes_since(position, cluster.namespace)}
        assert written == {("patch", "configmaps", "slurm-users")} | {
            ("patch", "pods", pod) for pod in before if not pod.startswith("mariadb-")}, written

        # a changed key: the new one works, the old one no longer does
        cluster.save(config_users=alice_only + [{"name": "bob", "uid": 2002, "authorized_keys": [
            bob_keys[1].with_suffix(".pub").read_text().strip()]}])
        cluster.site()
        # (site.yml waited for slurmctld's copy; login's kubelet, made to sync at once, within seconds)
        wait_for(lambda: bob_can_srun(bob_keys[1]), 30, "bob's new key to work")
        wait_for(lambda: bob("true", bob_keys[0]).returncode == 255, 30, "bob's old key to be refused")

        # not removed while a job of theirs is in the queue: refused before any change
        bobs = bob("sbatch --parsable -o /dev/null --wrap 'sleep 600'", bob_keys[1], check=True).stdout.strip()
        cluster.save(config_users=alice_only)
        proc, _changed, _seconds = cluster.site(check=False)
        assert proc.returncode != 0
        assert "config_users removes bob, who still own 1 job(s): %s bob" % bobs in proc.stdout, proc.stdout[-3000:]
        assert "bob:" in cluster.ctld("cat", "/var/lib/extrausers/passwd").stdout
        cluster.ctld("scancel", bobs)
        wait_for(lambda: cluster.ctld("squeue", "-h", "-u", "bob").stdout.strip() == "", 60, "bob's job to leave the queue")
        # removed: no login, the home stays
        cluster.site()
        wait_for(lambda: bob("true", bob_keys[1]).returncode == 255, 30, "bob's login to be refused")
        assert cluster.ctld("getent", "passwd", "bob", check=False).returncode == 2
        assert cluster.ssh("stat -c %u /home/bob").stdout.split() == ["2002"]
    finally:
        cluster.save(config_users=alice_only)
    assert cluster.job_state(held) == "RUNNING", "the job holding both nodes did not survive the user changes"
    assert cluster.kube.pod_identity(cluster.namespace) == before, "a user change replaced or restarted a pod"
    cluster.ssh("touch %s" % release)
    wait_for(lambda: cluster.accounted_state(held) == ["COMPLETED"], 60, "job %s to complete" % held)


def test_accounting_as_code_limits_and_enforcement(cluster):
    """config_qos/config_accounts through site.yml: associations enforced at submit by Slurm itself,
    MaxJobsPerUser keeps a second job PENDING, MaxWall with DenyOnLimit refuses a longer job; no pod
    restarts for it and a second run changes nothing."""
    # the first run gave alice the default account; a user without an association is refused
    assert {"users|alice", "users|"} <= cluster.associations()
    refused = cluster.ctld("runuser", "-u", "nobody", "--", "sbatch", "-o", "/dev/null", "--wrap", "true", check=False)
    assert refused.returncode != 0, refused.stdout
    assert "Invalid account or account/partition combination specified" in refused.stderr, refused.stderr

    before = cluster.kube.pod_identity(cluster.namespace)
    cluster.save(config_qos=[{"name": "debug", "max_jobs_per_user": 1, "max_wall": "00:10:00", "flags": ["DenyOnLimit"]}],
                 config_accounts=[{"name": "physics", "description": "Physics", "qos": ["normal", "debug"],
                                   "default_qos": "normal"}],
                 config_users=[dict(cluster.variables["config_users"][0], account="physics", accounts=["users"])])
    _proc, changed, seconds = cluster.site()
    cluster.timings["site_accounting_run_s"] = seconds
    assert changed > 0
    assert {"physics|", "physics|alice", "users|alice"} <= cluster.associations()
    _proc, changed, _seconds = cluster.site()
    assert changed == 0, "a second run changed accounting again"
    assert cluster.kube.pod_identity(cluster.namespace) == before, "an accounting change replaced or restarted a pod"

    first = cluster.ssh("sbatch --parsable -q debug -t 5 -o /dev/null --wrap 'sleep 600'").stdout.strip()
    second = cluster.ssh("sbatch --parsable -q debug -t 5 -o /dev/null --wrap 'true'").stdout.strip()
    try:
        wait_for(lambda: cluster.job_state(first) == "RUNNING", 60, "job %s to run" % first)
        assert cluster.ctld("squeue", "-h", "-j", first, "-o", "%a|%q").stdout.strip() == "physics|debug"
        wait_for(lambda: cluster.ctld("squeue", "-h", "-j", second, "-o", "%T|%r").stdout.strip()
                 == "PENDING|QOSMaxJobsPerUserLimit", 60, "job %s pending on the QoS limit" % second)
        longer = cluster.ssh("sbatch -q debug -t 20 -o /dev/null --wrap true", check=False)
        assert longer.returncode != 0 and "Job violates accounting/QOS policy" in longer.stderr, longer.stderr
    finally:
        cluster.ctld("scancel", first, check=False)
    wait_for(lambda: cluster.accounted_state(second) == ["COMPLETED"], 120,
             "job %s to run once the first one ended" % second)


def test_kubectl_drain_honours_the_disruption_budgets(cluster):
    """docs/architecture.md: the PodDisruptionBudgets keep a node drain from evicting slurmctld,
    slurmdbd, MariaDB and login; the drain of this (only) node therefore fails on them and leaves them
    running, while the slurmd pods are evicted (drain Slurm's nodes first: docs/operations.md)."""
    before = {name: pod["metadata"]["uid"] for name, pod in cluster.kube.pods(cluster.namespace).items()}
    node = cluster.kube.get("nodes")["items"][0]["metadata"]["name"]
    try:
        proc = cluster.kube.kubectl("drain", node, "--ignore-daemonsets", "--delete-emptydir-data",
                                    "--pod-selector", "app.kubernetes.io/instance=%s" % NAME, "--timeout=40s",
                                    check=False, timeout=120)
        assert proc.returncode != 0
        for pod in PROTECTED + (login_pod(cluster),):
            assert "Cannot evict pod as it would violate the pod's disruption budget" in proc.stderr + proc.stdout
            assert cluster.kube.get("pod", pod, cluster.namespace)["metadata"]["uid"] == before[pod], pod
        assert "evicting pod %s/slurmd-0" % cluster.namespace in proc.stderr + proc.stdout
    finally:
        cluster.kube.kubectl("uncordon", node)
    wait_for(cluster.pods_ready, 240, "every pod ready after the uncordon")
    cluster.wait_nodes({"slurmd-0": "idle", "slurmd-1": "idle"}, 120)


# --- slurmrestd with auth/jwt -------------------------------------------------------------------------
REST_API = "/slurm/v0.0.42"     # a data parser of every supported major (24.11: v0.0.40-42, 26.05: v0.0.42-45)
REST_CLIENT = """
import json, sys, urllib.request, urllib.error
path, token, user, body = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
headers = {"Content-Type": "application/json"}
if token: headers["X-SLURM-USER-TOKEN"] = token
if user: headers["X-SLURM-USER-NAME"] = user
request = urllib.request.Request("http://slurmrestd:6820" + path, data=body.encode() if body else None, headers=headers)
try:
    with urllib.request.urlopen(request, timeout=60) as response:
        status, text = response.status, response.read().decode()
except urllib.error.HTTPError as error:
    status, text = error.code, error.read().decode()
print(json.dumps({"status": status, "text": text}))
"""


def rest(cluster, path, token="", user="", body=None):
    """(HTTP status, parsed JSON or None) of a slurmrestd request made from the login pod through the
    Service, as a user's tool makes it."""
    out = cluster.kube.exec(cluster.namespace, login_pod(cluster), "python3", "-c", REST_CLIENT, path, token, user,
                            json.dumps(body) if body is not None else "").stdout
    reply = json.loads(out)
    try:
        return reply["status"], json.loads(reply["text"])
    except ValueError:
        return reply["status"], None


def user_token(cluster, user="alice"):
    out = cluster.ssh("scontrol token lifespan=900", user=user).stdout.strip()
    assert out.startswith("SLURM_JWT="), out
    return out.split("=", 1)[1]


def test_rest_api_refuses_requests_without_a_valid_token(cluster):
    assert rest(cluster, REST_API + "/jobs")[0] == 401
    token = user_token(cluster)
    # a token with one character changed in its signature
    forged = token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]
    status, reply = rest(cluster, REST_API + "/jobs", forged, "alice")
    assert status != 200 or reply["errors"], (status, reply)
    # a user cannot have a token made for another user
    proc = cluster.ssh("scontrol token username=root lifespan=60", check=False)
    assert proc.returncode != 0 and "SLURM_JWT" not in proc.stdout, proc.stdout + proc.stderr


def test_rest_api_lists_and_submits_jobs_as_the_token_user(cluster):
    token = user_token(cluster)
    held = cluster.ssh("sbatch --parsable --hold --job-name rest-held --wrap true").stdout.strip()
    try:
        status, reply = rest(cluster, REST_API + "/jobs", token, "alice")
        assert status == 200 and not reply["errors"], (status, reply)
        listed = {str(job["job_id"]): job["user_name"] for job in reply["jobs"]}
        assert listed.get(held) == "alice", listed
        # acting as someone else with alice's token is refused (slurmctld checks the token's user)
        status, reply = rest(cluster, REST_API + "/jobs", token, "root")
        assert status != 200 or reply["errors"], (status, reply)
        script = "#!/bin/bash\nid -u > /home/alice/rest-$SLURM_JOB_ID.out\n"
        job = {"job": {"name": "rest-submit", "script": script, "current_working_directory": "/home/alice",
                       "environment": ["PATH=/usr/bin:/bin"]}}
        status, reply = rest(cluster, REST_API + "/job/submit", token, "alice", job)
        assert status == 200 and not reply["errors"], (status, reply)
        submitted = str(reply["job_id"])
        status, reply = rest(cluster, REST_API + "/job/submit", token, "root", job)
        assert status != 200 or reply["errors"], (status, reply)
    finally:
        cluster.ctld("scancel", held)
    wait_for(lambda: cluster.accounted_state(submitted) == ["COMPLETED"], 120,
             "job %s COMPLETED in sacct (last: %s)" % (submitted, cluster.accounted_state(submitted)))
    assert cluster.ssh("cat /home/alice/rest-%s.out" % submitted).stdout.strip() == "2001"
    user = cluster.ctld("sacct", "-n", "-X", "-j", submitted, "-o", "User%20").stdout.split()
    assert user == ["alice"], user


def test_jwt_key_is_only_in_slurmctld_and_slurmdbd(cluster):
    pods = cluster.kube.pods(cluster.namespace)
    holders = {name for name, pod in pods.items()
               if any(volume.get("secret", {}).get("secretName") == "slurm-jwt-key" for volume in pod["spec"]["volumes"])}
    assert holders == {"slurmctld-0", "slurmdbd-0"}, holders
    login = login_pod(cluster)
    for path in ("/etc/slurm/jwt_hs256.key", "/etc/slurm-k8s/jwt"):
        assert cluster.kube.exec(cluster.namespace, login, "test", "-e", path, check=False).returncode == 1, path
    # nor in a job on a worker
    found = cluster.ssh("srun -N1 sh -c 'ls /etc/slurm/jwt_hs256.key /etc/slurm-k8s/jwt 2>/dev/null; echo end'").stdout
    assert found.split() == ["end"], found
    # slurmrestd itself holds no key (neither JWT nor munge) and runs as its own unprivileged user
    restd = next(name for name in pods if name.startswith("slurmrestd-"))
    ids = cluster.kube.exec(cluster.namespace, restd, "id", "-u", "-n").stdout.strip()
    assert ids == "slurmrestd", ids
    for path in ("/etc/slurm/jwt_hs256.key", "/etc/munge/munge.key"):
        assert cluster.kube.exec(cluster.namespace, restd, "test", "-e", path, check=False).returncode == 1, path


def test_service_token_playbook_stores_a_working_token_once(cluster):
    extra = ("-e", "slurmrestd_token_user=alice", "-e", "slurmrestd_token_secret=alice-rest-token")
    _proc, changed, _seconds = cluster.playbook("slurmrestd_token", *extra)
    assert changed > 0
    secret = cluster.kube.get("secret", "alice-rest-token", cluster.namespace)
    data = {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}
    assert data["user"] == "alice" and int(data["expires"]) > time.time() + 29 * 86400, data["expires"]
    status, reply = rest(cluster, REST_API + "/jobs", data["SLURM_JWT"], "alice")
    assert status == 200 and not reply["errors"], (status, reply)
    proc, changed, _seconds = cluster.playbook("slurmrestd_token", *extra)
    assert changed == 0, proc.stdout[-3000:]
    assert "SLURM_JWT" not in proc.stdout and data["SLURM_JWT"] not in proc.stdout
    # a user Slurm does not know gets no token, and the message says so
    proc, _changed, _seconds = cluster.playbook("slurmrestd_token", "-e", "slurmrestd_token_user=nosuchuser",
                                                "-e", "slurmrestd_token_secret=nobody-token", check=False)
    assert proc.returncode != 0 and "nosuchuser is not a user of the cluster" in proc.stdout, proc.stdout[-3000:]
    assert cluster.kube.get("secret", "nobody-token", cluster.namespace, check=False) is None


def test_rotation_of_database_password_jwt_key_and_host_keys_loses_no_job(cluster):
    """secrets_rotation through site.yml while a job holds both workers: the passwords of slurm and root
    change in MariaDB first (ALTER USER, the new values read from the Secret in the pod), then in the
    Secret, then slurmdbd restarts alone (MariaDB and the workers run on); the JWT key and the SSH host keys
    change (slurmctld and login restart). The job runs on and is COMPLETED in sacct with its id; the old
    passwords no longer log in, the new ones do; no password is in the output; a second run with the same
    labels changes nothing."""
    def secret(name):
        return cluster.kube.get("secret", name, cluster.namespace)

    def maria_login(password, user="-h127.0.0.1 -uslurm"):
        # the password on stdin, not in a command line (root: through the socket, as root@localhost)
        return cluster.kube.exec(cluster.namespace, "mariadb-0", "sh", "-c",
                                 'read -r p; MYSQL_PWD="$p" mariadb %s -N -e "SELECT 1"' % user,
                                 container="mariadb", input=password + "\n", check=False).returncode

    old = {name: secret(name)["data"] for name in ("slurm-database", "slurm-jwt-key", "ssh-host-keys")}
    old_password, old_root = (base64.b64decode(old["slurm-database"][key]).decode() for key in ("password", "root-password"))
    release = "/home/alice/release-%d" % time.time_ns()
    held = cluster.ssh("sbatch --parsable -N2 -o /dev/null --wrap 'srun -N2 sh -c \"while [ ! -e %s ]; do sleep 1; done\"'"
                       % release).stdout.strip()
    wait_for(lambda: cluster.job_state(held) == "RUNNING", 60, "job %s to run on both nodes" % held)
    before = cluster.kube.pod_identity(cluster.namespace)
    labels = {"database": "2026-12", "jwt": "2026-12", "ssh": "2026-12"}
    cluster.save(secrets_rotation=labels)
    try:
        proc, changed, seconds = cluster.site()
        cluster.timings["site_rotation_s"] = seconds
        assert changed > 0 and "rotating database, jwt, ssh" in proc.stdout, proc.stdout[-3000:]
        new = {name: secret(name) for name in old}
        password, root = (base64.b64decode(new["slurm-database"]["data"][key]).decode() for key in ("password", "root-password"))
        assert sorted(new["slurm-database"]["data"]) == ["password", "root-password"]
        assert password != old_password and root != old_root
        assert new["slurm-jwt-key"]["data"] != old["slurm-jwt-key"] and new["ssh-host-keys"]["data"] != old["ssh-host-keys"]
        for name in old:
            assert new[name]["metadata"]["annotations"]["hpc.slurm-k8s/rotation"] == "2026-12", name
        for value in (old_password, password, old_root, root):
            assert value not in proc.stdout
        assert maria_login(password) == 0 and maria_login(old_password) != 0
        assert maria_login(root, "-uroot") == 0 and maria_login(old_root, "-uroot") != 0
        after = cluster.kube.pod_identity(cluster.namespace)
        for pod in ("mariadb-0", "slurmd-0", "slurmd-1"):
            assert after[pod] == before[pod], "%s was restarted by the rotation" % pod
        for pod in ("slurmdbd-0", "slurmctld-0"):
            assert after[pod][0] != before[pod][0], "%s was not restarted with the new secrets" % pod
        # the same labels again: nothing to do
        _proc, changed, _seconds = cluster.site()
        assert changed == 0
    finally:
        cluster.save(secrets_rotation={})
    assert cluster.job_state(held) == "RUNNING", "the job holding both nodes did not survive the rotation"
    cluster.wait_for_login()
    cluster.ssh("touch %s" % release)
    wait_for(lambda: cluster.accounted_state(held) == ["COMPLETED"], 90, "job %s COMPLETED in sacct" % held)


def auth_keys(cluster):
    secret = cluster.kube.get("secret", "slurm-auth-key", cluster.namespace)
    return secret, json.loads(base64.b64decode(secret["data"]["slurm.jwks"]))["keys"]


def test_the_auth_key_set_is_read_by_the_daemons_only(cluster):
    """auth/slurm: slurm.jwks is projected into the `config` volume, root's only on login and the workers and
    SlurmUser's group's on slurmctld and slurmdbd; login's sackd, which runs as SlurmUser, reads a copy that only
    SlurmUser can. A user reads none of them, neither on login nor in a job, and authenticates through sackd
    (login) and slurmd (in the job)."""
    assert "AuthType=auth/slurm" in cluster.ctld("scontrol", "show", "config").stdout.replace(" ", "")
    _secret, keys = auth_keys(cluster)
    assert [key.get("use") for key in keys] == ["default"] and len(keys[0]["k"]) >= 43, "one default key"
    for pod, container, listing in ((login_pod(cluster), "login", "-r-------- 1 root root"),
                                    ("slurmd-0", "slurmd", "-r-------- 1 root root"),
                                    ("slurmctld-0", "slurmctld", "-r--r----- 1 root slurm"),
                                    ("slurmdbd-0", "slurmdbd", "-r--r----- 1 root slurm")):
        mode = cluster.kube.exec(cluster.namespace, pod, "sh", "-c", "ls -lL /etc/slurm-k8s/config/slurm.jwks",
                                 container=container).stdout
        assert mode.startswith(listing), (pod, mode)
    # sackd runs as SlurmUser on login, with a copy of its own (slurm-k8s-sackd-key)
    out = cluster.ssh("cat /etc/slurm-k8s/config/slurm.jwks /run/slurm-k8s/slurm.jwks 2>&1; "
                      "srun -N1 cat /etc/slurm-k8s/config/slurm.jwks 2>&1; sinfo -h -o %D", check=False).stdout
    assert out.count("Permission denied") == 3 and keys[0]["k"] not in out, out
    assert out.split()[-1] == "2", out


def test_rotation_of_the_auth_key_set_restarts_no_slurm_daemon_and_loses_no_job(cluster):
    """secrets_rotation.auth through site.yml while a job holds both workers: the new key is added, made the
    default and the old one retired, each step read by every pod and followed by a reconfigure (sackd on login
    re-reads it); only slurmdbd restarts (it reads the key set when it starts). The job runs on and is COMPLETED
    with its id, an admin's drain stays, a new job from login runs (sackd signs with the new key), the old key
    is in neither the Secret nor the output, and a second run with the same label changes nothing."""
    _secret, old_keys = auth_keys(cluster)
    release = "/home/alice/release-auth-%d" % time.time_ns()
    held = cluster.ssh("sbatch --parsable -N2 -o /dev/null --wrap 'srun -N2 sh -c \"while [ ! -e %s ]; do sleep 1; done\"'"
                       % release).stdout.strip()
    wait_for(lambda: cluster.job_state(held) == "RUNNING", 60, "job %s to run on both nodes" % held)
    cluster.ctld("scontrol", "update", "nodename=slurmd-1", "state=drain", "reason=admin: disk check")
    before = cluster.kube.pod_identity(cluster.namespace)
    cluster.save(secrets_rotation={"auth": "2026-12-auth"})
    try:
        proc, changed, seconds = cluster.site()
        cluster.timings["site_auth_rotation_s"] = seconds
        out = proc.stdout
        assert changed > 0 and "rotating auth" in out, out[-3000:]
        assert re.findall(r"key set (\d) of 3", out) and set(re.findall(r"key set (\d) of 3", out)) == {"1", "2", "3"}, out[-3000:]
        secret, keys = auth_keys(cluster)
        assert len(keys) == 1 and keys[0]["use"] == "default" and keys[0]["kid"] != old_keys[0]["kid"], [k["kid"] for k in keys]
        assert keys[0]["k"] != old_keys[0]["k"] and secret["metadata"]["annotations"]["hpc.slurm-k8s/rotation"] == "2026-12-auth"
        for value in (old_keys[0]["k"], keys[0]["k"]):
            assert value not in out
        after = cluster.kube.pod_identity(cluster.namespace)
        restarted = {pod for pod in before if pod in after and after[pod] != before[pod]}
        assert restarted == {"slurmdbd-0"}, restarted
        assert cluster.nodes()["slurmd-1"] == ("drng", "admin: disk check"), cluster.nodes()
        cluster.ctld("scontrol", "update", "nodename=slurmd-1", "state=resume")
        # every pod holds the new set: a job from login (sackd) across both workers, and accounting
        assert sorted(cluster.ssh("srun -N2 -t 1 hostname").stdout.split()) == ["slurmd-0", "slurmd-1"]
        assert cluster.job_state(held) == "RUNNING", "the job holding both nodes did not survive the rotation"
        _proc, changed, _seconds = cluster.site()
        assert changed == 0
    finally:
        cluster.save(secrets_rotation={})
        cluster.ctld("scontrol", "update", "nodename=slurmd-1", "state=resume", check=False)
    cluster.ssh("touch %s" % release)
    wait_for(lambda: cluster.accounted_state(held) == ["COMPLETED"], 90, "job %s COMPLETED in sacct" % held)
