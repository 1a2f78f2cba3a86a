"""Tier T3: power saving on a real Kubernetes: slurmctld's ResumeProgram and SuspendProgram
(slurm-k8s-power in the daemon image) create and delete burst pods through the API server, with the
token and the Role of the slurmctld ServiceAccount, and nothing else.

One always-on worker (partition compute) and a burst group of two nodes (partition burst) in
namespace slurm-power. A job in the burst partition powers a node up: its pod is created by the
slurmctld ServiceAccount (the API server's audit log says who), the job runs there and, after
SuspendTime idle, the pod is deleted again. The Role allows exactly that: the same token cannot
delete the slurmctld pod or read a Secret (the API server answers 403). The burst pods are owned
by the slurmctld StatefulSet: deleting it garbage-collects them.
"""

from __future__ import annotations

import json
import os
import re
import time
from datetime import datetime

import pytest

from tests.k8s.cluster import SlurmOnKube
from tests.support.proc import collection_version, wait_for

NAME = "power"
SUSPEND_TIME = 10
RESUME_TIMEOUT = 120


@pytest.fixture(scope="module")
def cluster(kube, tmp_path_factory):
    tag = "%s-power" % collection_version()
    deployment = SlurmOnKube(kube, tmp_path_factory.mktemp("power"), NAME, tag, 30052, slurmd_replicas=1,
                             slurmd_cpus=1, powersave_groups=[{
                                 "name": "burst", "count": 2, "cpus": 1, "memory_mib": 512,
                                 "cpu_request": "50m", "suspend_time": SUSPEND_TIME, "suspend_timeout": 30,
                                 "resume_timeout": RESUME_TIMEOUT}])
    kube.build_and_load_images(tag)
    kube.delete_namespace(deployment.namespace)
    proc, changed, seconds = deployment.site()
    deployment.timings["site_s"] = seconds
    assert changed > 0
    # the burst group's image (powersave_image: the node image) was version-checked with the workers' before
    # any pod existed
    assert "slurmd_image, login_image, powersave_image (hpc-slurm-k8s/slurm:%s): Slurm " % tag in proc.stdout, \
        proc.stdout[-3000:]
    yield deployment
    print("\npower timings: %s" % json.dumps({k: round(v, 1) for k, v in deployment.timings.items()}))
    if os.environ.get("KEEP_E2E") != "1":
        deployment.delete()


def service_account(cluster):
    return "system:serviceaccount:%s:slurmctld" % cluster.namespace


def burst_pods(cluster):
    return sorted(cluster.kube.pods(cluster.namespace, "app.kubernetes.io/component=burst-worker"))


def sacct_times(cluster, job):
    """Submit and Start of `job` as Slurm recorded them."""
    submit, start = cluster.ctld("sacct", "-n", "-X", "-P", "-j", job, "-o", "Submit,Start").stdout.strip().split("|")
    return datetime.fromisoformat(submit), datetime.fromisoformat(start)


def test_a_burst_job_powers_a_pod_up_and_idle_powers_it_down(cluster):
    assert burst_pods(cluster) == []
    position = cluster.kube.audit_position()
    job = cluster.ctld("sbatch", "--parsable", "-p", "burst", "-N1", "-o", "/dev/null", "--wrap", "hostname").stdout.strip()
    wait_for(lambda: cluster.accounted_state(job) == ["COMPLETED"], 180, "burst job %s COMPLETED" % job)
    submit, start = sacct_times(cluster, job)
    cluster.timings["burst_submit_to_start_s"] = (start - submit).total_seconds()
    node = cluster.ctld("sacct", "-n", "-X", "-j", job, "-o", "NodeList%40").stdout.strip()
    assert node in ("slurmd-burst-0", "slurmd-burst-1")
    # after SuspendTime idle, SuspendProgram deletes the pod: the final state is no burst pod
    wait_for(lambda: burst_pods(cluster) == [], SUSPEND_TIME + 120, "the burst pod to be deleted")
    wait_for(lambda: cluster.node_states().get(node) == "idle~", 60, "%s powered down (idle~)" % node)
    by_sa = {(w["verb"], w["objectRef"]["resource"], w["objectRef"].get("name"))
             for w in cluster.kube.writes_since(position, cluster.namespace, user=service_account(cluster))}
    assert ("create", "pods", None) in by_sa or ("create", "pods", node) in by_sa, by_sa
    assert ("delete", "pods", node) in by_sa, by_sa
    print("\nsubmit -> start of a burst job: %.0f s (Slurm's Submit and Start times)"
          % cluster.timings["burst_submit_to_start_s"])
    # PrologSlurmctld waited until the node had registered, and slurmctld launched the job when it ended
    # (prolog_running_decr), not at its next periodic job check (job_time_limit, every 30 s): the records of both
    power_log = cluster.ctld("cat", "/var/log/slurm/slurm-k8s-power.log").stdout
    assert re.search(r"prolog INFO job %s: every burst node registered after" % job, power_log), power_log[-3000:]
    ctld_log = cluster.kube.kubectl("logs", "-n", cluster.namespace, "slurmctld-0", "-c", "slurmctld").stdout
    assert re.search(r"prolog_running_decr: Configuration for JobId=%s is complete" % job, ctld_log), ctld_log[-3000:]
    # The job ran on the first power-up: a resume that fails marks the node DOWN only at ResumeTimeout and
    # requeues the job, so it would start ResumeTimeout or more after submit. How fast the first power-up
    # is depends on the machine's load (15 s idle, the README figure; 68 s seen in a loaded CI run), so
    # no speed is asserted here.
    assert cluster.timings["burst_submit_to_start_s"] < RESUME_TIMEOUT


def api_as_slurmctld(cluster, method, path):
    """HTTP status of an API request made from the slurmctld pod with the token slurm-k8s-power uses."""
    code = ("import json, ssl, urllib.request, urllib.error\n"
            "cfg = json.load(open('/etc/slurm-k8s/power/config.json'))\n"
            "ctx = ssl.create_default_context(cafile=cfg['ca_file'])\n"
            "req = urllib.request.Request(cfg['api_server'] + %r, method=%r,\n"
            "    headers={'Authorization': 'Bearer ' + open(cfg['token_file']).read().strip()})\n"
            "try:\n    print(urllib.request.urlopen(req, context=ctx, timeout=10).status)\n"
            "except urllib.error.HTTPError as e:\n    print(e.code)\n" % (path, method))
    return int(cluster.ctld("python3", "-c", code).stdout.strip())


def test_rbac_allows_only_the_burst_pods(cluster):
    pods = "/api/v1/namespaces/%s/pods" % cluster.namespace
    assert api_as_slurmctld(cluster, "DELETE", pods + "/slurmctld-0") == 403
    assert api_as_slurmctld(cluster, "DELETE", pods + "/slurmd-0") == 403
    assert api_as_slurmctld(cluster, "GET", "/api/v1/namespaces/%s/secrets" % cluster.namespace) == 403
    assert api_as_slurmctld(cluster, "GET", "/api/v1/namespaces/%s/secrets/munge-key" % cluster.namespace) == 403
    # what it needs: its burst pods (a missing one is a 404, not a 403)
    assert api_as_slurmctld(cluster, "GET", pods + "/slurmd-burst-1") in (200, 404)
    assert cluster.kube.get("pod", "slurmctld-0", cluster.namespace) is not None


def test_a_new_pod_template_powers_a_busy_burst_node_down_only_after_its_job(cluster):
    """site.yml with another pod template for the burst group while a burst job runs: the running pod is
    not deleted under its job; its node is drained to power down (POWER_DOWN_ASAP, our reason), so it
    takes no new job; the job completes, Slurm deletes the pod, and the next burst job on that node runs
    in a pod of the new template. A second run changes nothing."""
    template = "hpc.slurm-k8s/pod-template"
    release = "/tmp/power-release"
    wait_loop = "while [ ! -e %s ]; do sleep 0.5; done" % release
    job = cluster.sbatch("-p", "burst", "-N1", "-o", "/dev/null", "--wrap", wait_loop)
    wait_for(lambda: cluster.job_state(job) == "RUNNING", 180, "burst job %s running" % job)
    node = cluster.ctld("squeue", "-h", "-j", job, "-o", "%N").stdout.strip()
    before = cluster.kube.get("pod", node, cluster.namespace)
    group = dict(cluster.variables["powersave_groups"][0], cpu_request="60m")
    cluster.save(powersave_groups=[group])
    position = cluster.kube.audit_position()
    proc, changed, seconds = cluster.site()
    cluster.timings["site_new_burst_template_s"] = seconds
    assert changed > 0
    # the group's image is the one its template has already (read from the ConfigMap): no version check pod
    written = {(w["verb"], w["objectRef"]["resource"], w["objectRef"].get("name"))
               for w in cluster.kube.writes_since(position, cluster.namespace)}
    assert not [write for write in written if write[1] == "pods" and (write[0] == "create" or write[2] == "slurm-version-check")], \
        written
    assert "TASK [hpc.slurm_k8s.powersave : Power down once their jobs end (Slurm then deletes their pods) %s]" % node \
        in proc.stdout, proc.stdout[-3000:]
    # the pod runs on under its job; the node takes no new job and powers down after it
    assert cluster.kube.get("pod", node, cluster.namespace)["metadata"]["uid"] == before["metadata"]["uid"]
    assert cluster.job_state(job) == "RUNNING"
    state = cluster.ctld("scontrol", "-o", "show", "node", node).stdout
    assert re.search(r" State=\S*DRAIN\S*POWER_DOWN", state) and \
        "Reason=hpc.slurm_k8s:powerdown burst pod of an older template" in state, state
    # a second run changes nothing (the slurmd rollout's final resume leaves this drain to Slurm)
    _proc, changed, _seconds = cluster.site()
    assert changed == 0
    state = cluster.ctld("scontrol", "-o", "show", "node", node).stdout
    assert re.search(r" State=\S*DRAIN\S*POWER_DOWN", state), state
    cluster.kube.exec(cluster.namespace, node, "touch", release, container="slurmd")
    wait_for(lambda: cluster.accounted_state(job) == ["COMPLETED"], 60, "burst job %s COMPLETED" % job)
    wait_for(lambda: node not in burst_pods(cluster), 120, "the pod of %s to be deleted" % node)
    # powered up again for the next job: a pod of the new template
    again = cluster.sbatch("-p", "burst", "-w", node, "-o", "/dev/null", "--wrap", wait_loop)
    wait_for(lambda: cluster.job_state(again) == "RUNNING", 180, "burst job %s running" % again)
    after = cluster.kube.get("pod", node, cluster.namespace)
    assert after["metadata"]["annotations"][template] != before["metadata"]["annotations"][template]
    assert after["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "60m"
    cluster.kube.exec(cluster.namespace, node, "touch", release, container="slurmd")
    wait_for(lambda: cluster.accounted_state(again) == ["COMPLETED"], 60, "burst job %s COMPLETED" % again)


def test_deleting_the_slurmctld_statefulset_garbage_collects_the_burst_pods(cluster):
    job = cluster.ctld("sbatch", "--parsable", "-p", "burst", "-N1", "-o", "/dev/null", "--wrap", "sleep 600").stdout.strip()
    wait_for(lambda: cluster.job_state(job) == "RUNNING", 180, "burst job %s running" % job)
    pods = burst_pods(cluster)
    assert len(pods) == 1
    owner = cluster.kube.get("pod", pods[0], cluster.namespace)["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("StatefulSet", "slurmctld")
    cluster.kube.kubectl("delete", "statefulset", "slurmctld", "-n", cluster.namespace, "--cascade=background")
    wait_for(lambda: burst_pods(cluster) == [], 180, "the garbage collector to delete the burst pods")
    time.sleep(1)
    assert burst_pods(cluster) == []
