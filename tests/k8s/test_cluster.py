"""Tier T3: site.yml through the Kubernetes API of a real cluster, then real users, jobs and failures.

site.yml applies the cluster with kubernetes.core (server-side apply, readiness waits) into namespace
slurm-e2e; the StatefulSet and Deployment controllers, the scheduler, the kubelet, kube-proxy,
CoreDNS, kube-router (NetworkPolicy), Pod Security admission and the PodDisruptionBudget checks of
the eviction API all act on it for real. A user SSHes into the login pod through its NodePort on
127.0.0.1 and runs jobs; pods are deleted and come back; the collection's modules run in the
slurmctld pod through the kubernetes.core.kubectl connection; the API server's audit log shows that
a re-run writes nothing.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from tests.k8s.cluster import SlurmOnKube
from tests.support.proc import ROOT, collection_version, run, wait_for

NAME = "e2e"
SSH_PORT = 30032
PODS = ("mariadb-0", "slurmdbd-0", "slurmctld-0", "slurmd-0", "slurmd-1")
PROTECTED = ("mariadb-0", "slurmdbd-0", "slurmctld-0")     # and login: PodDisruptionBudgets


@pytest.fixture(scope="module")
def cluster(kube, tmp_path_factory):
    tag = "%s-e2e" % collection_version()
    deployment = SlurmOnKube(kube, tmp_path_factory.mktemp("e2e"), NAME, tag, SSH_PORT)
    started = time.monotonic()
    kube.build_and_load_images(tag)
    deployment.timings["images_s"] = time.monotonic() - started
    kube.delete_namespace(deployment.namespace)
    _proc, changed, seconds = deployment.site()
    deployment.timings["site_first_run_s"] = seconds
    assert changed > 0
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
    names = sorted(name if not name.startswith("login-") else "login" for name in pods)
    assert names == sorted(PODS + ("login",)), names
    assert all(cluster.kube.is_ready(pod) for pod in pods.values()), {n: p["status"]["phase"] for n, p in pods.items()}
    cluster.wait_nodes({"slurmd-0": "idle", "slurmd-1": "idle"}, 90)


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


def test_mpi_with_pmix_across_two_pods(cluster):
    out = cluster.ssh("srun --mpi=pmix -N2 -n4 --overcommit python3 -c "
                      "'from mpi4py import MPI; c = MPI.COMM_WORLD; print(c.Get_rank(), c.Get_size(), MPI.Get_processor_name())'",
                      timeout=240).stdout
    ranks = sorted(line.split() for line in out.splitlines() if line.strip())
    assert [r[0] for r in ranks] == ["0", "1", "2", "3"] and all(r[1] == "4" for r in ranks)
    assert {r[2] for r in ranks} == {"slurmd-0", "slurmd-1"}


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


def test_modules_through_the_kubectl_connection(cluster):
    inventory = cluster.workdir / "slurmctld.ini"
    inventory.write_text(
        "slurmctld ansible_connection=kubernetes.core.kubectl ansible_kubectl_namespace=%s "
        "ansible_kubectl_pod=slurmctld-0 ansible_kubectl_container=slurmctld ansible_kubectl_kubeconfig=%s "
        "ansible_python_interpreter=/usr/bin/python3\n" % (cluster.namespace, cluster.kube.kubeconfig))
    run(["ansible-playbook", "-i", inventory, ROOT / "tests" / "k8s" / "playbooks" / "modules_on_slurm_24_11.yml"],
        timeout=300, env=cluster.kube.env)
    cluster.wait_nodes({"slurmd-0": "idle", "slurmd-1": "idle"}, 30)


def test_slurm_conf_change_is_applied_by_reconfigure_without_restart(cluster):
    before = cluster.kube.pod_identity(cluster.namespace)
    position = cluster.kube.audit_position()
    cluster.save(config_slurm_conf={"MaxJobCount": 12345})
    proc, changed, seconds = cluster.site()
    cluster.timings["site_reconfigure_run_s"] = seconds
    assert changed > 0 and "Reconfigure Slurm" in proc.stdout
    assert "12345" in cluster.ctld("scontrol", "show", "config").stdout.split("MaxJobCount")[1].split("\n")[0]
    assert cluster.kube.pod_identity(cluster.namespace) == before, "a pod was replaced or restarted"
    # the only object written is the slurm.conf ConfigMap
    written = {(w["verb"], w["objectRef"]["resource"], w["objectRef"].get("name")) for w in cluster.kube.writes_since(position, cluster.namespace)}
    assert written == {("patch", "configmaps", "slurm-config")}, written


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
