"""Tier T3: Slurm's own metrics (cluster_metrics_enabled) scraped by a real Prometheus on a real Kubernetes.

One cluster of Slurm 26.05 images (namespace slurm-metrics, 2 workers of 2 CPUs) deployed with metrics on.
Prometheus is Debian forky's package (tests/images/prometheus), run as a pod in a namespace of its own with the
label the slurmctld-metrics NetworkPolicy admits by default; its scrape configuration has a job per path that
the Service slurmctld-metrics announces (annotation hpc.slurm-k8s/metrics-paths), each target the Service
itself. A second Prometheus with another label, in the same namespace, is kept out by the NetworkPolicy.

Every assertion on a series reads a sample Prometheus scraped after the state it shows was reached and while
that state lasts (jobs held until the test releases them, a node the test drained): no transient state is
caught by polling. The ServiceMonitor is refused without its API (nothing written), then written once the
Prometheus Operator's real CustomResourceDefinition (tests/support/crds) is installed, and removed again.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.parse

import pytest
import yaml

from tests.k8s.cluster import SlurmOnKube
from tests.support.kube import LOCALKUBE
from tests.support.proc import ROOT, collection_version, run, wait_for

NAME = "metrics"
MAJOR = "26.05"
MONITORING = "slurm-metrics-monitoring"
PROMETHEUS_IMAGE = "hpc-slurm-k8s/prometheus-test:%s"
CRD = ROOT / "tests" / "support" / "crds" / "monitoring.coreos.com_servicemonitors.yaml"
SCRAPE_INTERVAL = 2
DASHBOARD = ROOT / "roles" / "slurmctld" / "files" / "slurm-dashboard.json"
ARRAY_TASKS = 4
RELEASE = "/tmp/metrics-release"
# the scrape jobs of the test's Prometheus: one per path of the Service's annotation (the default paths)
SCRAPE_JOBS = {"slurm-jobs", "slurm-nodes", "slurm-partitions", "slurm-scheduler"}


@pytest.fixture(scope="module")
def cluster(kube, tmp_path_factory):
    tag = "%s-metrics" % collection_version()
    deployment = SlurmOnKube(kube, tmp_path_factory.mktemp("metrics"), NAME, tag, 30046, cluster_metrics_enabled=True)
    started = time.monotonic()
    kube.build_and_load_images(tag, slurm_major=MAJOR)
    # after the Slurm images: their build made the forky base image
    deployment.prometheus_image = PROMETHEUS_IMAGE % tag
    run(["docker", "build", "-q", "-t", deployment.prometheus_image, ROOT / "tests" / "images" / "prometheus"], timeout=900)
    run(LOCALKUBE + ["load-images", deployment.prometheus_image], timeout=600)
    deployment.timings["images_s"] = time.monotonic() - started
    kube.delete_namespace(deployment.namespace)
    kube.delete_namespace(MONITORING)
    kube.kubectl("delete", "--ignore-not-found", "-f", CRD)
    yield deployment
    print("\nmetrics timings: %s" % json.dumps({k: round(v, 1) for k, v in deployment.timings.items()}))
    kube.kubectl("delete", "--ignore-not-found", "-f", CRD, check=False)
    if os.environ.get("KEEP_E2E") != "1":
        kube.delete_namespace(MONITORING)
        deployment.delete()


# --- Prometheus ----------------------------------------------------------------------------------------
def prometheus_manifests(cluster, name, labels):
    """ConfigMap and Pod of a Prometheus in MONITORING: a job per path of the Service's annotation."""
    service = cluster.kube.get("service", "slurmctld-metrics", namespace=cluster.namespace)
    paths = service["metadata"]["annotations"]["hpc.slurm-k8s/metrics-paths"].split(",")
    target = "slurmctld-metrics.%s.svc:6817" % cluster.namespace
    config = {"global": {"scrape_interval": "%ds" % SCRAPE_INTERVAL, "scrape_timeout": "%ds" % SCRAPE_INTERVAL},
              "scrape_configs": [{"job_name": "slurm-%s" % path.rsplit("/", 1)[1], "metrics_path": path,
                                  "static_configs": [{"targets": [target], "labels": {"namespace": cluster.namespace}}]}
                                 for path in paths]}
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": MONITORING},
         "data": {"prometheus.yml": yaml.safe_dump(config)}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": MONITORING, "labels": labels},
         "spec": {"automountServiceAccountToken": False, "enableServiceLinks": False,
                  "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
                                      "seccompProfile": {"type": "RuntimeDefault"}},
                  "containers": [{
                      "name": "prometheus", "image": cluster.prometheus_image, "imagePullPolicy": "Never",
                      "args": ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus",
                               "--web.listen-address=:9090"],
                      "ports": [{"containerPort": 9090}],
                      "readinessProbe": {"httpGet": {"path": "/-/ready", "port": 9090}, "periodSeconds": 2},
                      "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "1Gi"}},
                      "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                      "volumeMounts": [{"name": "config", "mountPath": "/etc/prometheus"},
                                       {"name": "data", "mountPath": "/prometheus"}]}],
                  "volumes": [{"name": "config", "configMap": {"name": name}}, {"name": "data", "emptyDir": {}}]}},
    ]


def start_prometheus(cluster, name, labels):
    kube = cluster.kube
    if kube.get("namespace", MONITORING, check=False) is None:
        kube.kubectl("create", "namespace", MONITORING)
    kube.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                       "items": prometheus_manifests(cluster, name, labels)}))
    wait_for(lambda: kube.is_ready(kube.get("pod", name, namespace=MONITORING)), 120, "Prometheus pod %s ready" % name)


def query(cluster, name, promql, at=None):
    """The result vector of an instant query in Prometheus `name` (through the API server's pod proxy)."""
    params = {"query": promql, **({"time": "%.3f" % at} if at is not None else {})}
    raw = cluster.kube.kubectl("get", "--raw", "/api/v1/namespaces/%s/pods/%s:9090/proxy/api/v1/query?%s"
                               % (MONITORING, name, urllib.parse.urlencode(params))).stdout
    answer = json.loads(raw)
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def value_scraped_after(cluster, series, since, timeout=60):
    """The value of `series` in a scrape that Prometheus took after `since` (epoch seconds): the sample's own
    timestamp (the scrape's start) says that slurmctld answered after `since`. A timeout names why Prometheus's
    scrapes fail (each target's last error)."""
    def sample():
        result = query(cluster, "prometheus", "%s and timestamp(%s) > %f" % (series, series, since))
        return result and [float(result[0]["value"][1])]
    return wait_for_scrapes(cluster, sample, timeout, "a scrape of %s after %.0f" % (series, since))[0]


def wait_for_scrapes(cluster, condition, timeout, what):
    """wait_for, whose timeout names why Prometheus's scrapes fail (each target's last error)."""
    try:
        return wait_for(condition, timeout, what)
    except AssertionError as error:
        raw = cluster.kube.kubectl("get", "--raw", "/api/v1/namespaces/%s/pods/prometheus:9090/proxy/api/v1/targets"
                                   % MONITORING, check=False).stdout
        targets = json.loads(raw)["data"]["activeTargets"] if raw.startswith("{") else raw
        raise AssertionError("%s; Prometheus's targets: %s" % (error, json.dumps(
            [{k: t.get(k) for k in ("scrapeUrl", "health", "lastError", "lastScrape")} for t in targets]
            if isinstance(targets, list) else targets))) from None


def metrics_type(cluster):
    """MetricsType as the running slurmctld reports it."""
    found = re.search(r"^MetricsType\s*=\s*(\S+)", cluster.ctld("scontrol", "show", "config").stdout, re.M)
    return found.group(1) if found else None


def selector(cluster):
    return '{namespace="%s"}' % cluster.namespace


# --- the tests -------------------------------------------------------------------------------------------
def test_a_service_monitor_without_its_api_is_refused_before_anything_is_written(cluster):
    position = cluster.kube.audit_position()
    proc, _changed, _seconds = cluster.site("-e", "slurmctld_metrics_service_monitor=true", check=False)
    assert proc.returncode != 0
    assert "slurmctld_metrics_service_monitor is true, but the cluster has no ServiceMonitor API" in proc.stdout, \
        proc.stdout[-3000:]
    assert "Nothing was changed" in proc.stdout
    assert cluster.kube.writes_since(position, cluster.namespace) == []


def test_site_deploys_with_the_operators_crd_a_service_monitor_and_the_dashboard_then_changes_nothing(cluster):
    """The Prometheus Operator's real CRD installed: one run writes Slurm with metrics, the ServiceMonitor and the
    dashboard's ConfigMap; a second run writes nothing."""
    kube = cluster.kube
    kube.kubectl("apply", "--server-side", "-f", CRD)
    # polled, not `kubectl wait`: a CRD just created has no status yet, and kubectl wait fails on that at once
    wait_for(lambda: any(c["type"] == "Established" and c["status"] == "True" for c in
                         (kube.get("crd", "servicemonitors.monitoring.coreos.com", check=False) or {})
                         .get("status", {}).get("conditions") or []), 60, "the ServiceMonitor CRD established")
    cluster.save(slurmctld_metrics_service_monitor=True, slurmctld_metrics_dashboard=True,
                 slurmctld_metrics_service_monitor_labels={"release": "kube-prometheus-stack"})
    proc, changed, seconds = cluster.site()
    cluster.timings["site_s"] = seconds
    assert changed > 0
    assert "metrics: Service 'slurmctld-metrics', port 6817, paths jobs, nodes, partitions, scheduler, ServiceMonitor" \
        " slurmctld-metrics" in proc.stdout
    cluster.wait_nodes({"slurmd-0": "idle", "slurmd-1": "idle"}, 120)
    assert metrics_type(cluster) == "metrics/openmetrics"
    monitor = kube.get("servicemonitor", "slurmctld-metrics", namespace=cluster.namespace)
    assert [e["path"] for e in monitor["spec"]["endpoints"]] == ["/metrics/jobs", "/metrics/nodes",
                                                                 "/metrics/partitions", "/metrics/scheduler"]
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    dashboard = kube.get("configmap", "slurm-dashboard", namespace=cluster.namespace)
    assert json.loads(dashboard["data"]["slurm.json"]) == json.loads(DASHBOARD.read_text())
    position = kube.audit_position()
    _proc, changed, _seconds = cluster.site()
    assert changed == 0
    assert kube.writes_since(position, cluster.namespace) == []


def test_prometheus_scrapes_every_path_through_the_service(cluster):
    start_prometheus(cluster, "prometheus", {"app.kubernetes.io/name": "prometheus"})
    wait_for(lambda: {r["metric"]["job"] for r in query(cluster, "prometheus", "up == 1")} == SCRAPE_JOBS, 120,
             "every scrape job up")
    for result in query(cluster, "prometheus", "up"):
        assert result["metric"]["instance"] == "slurmctld-metrics.%s.svc:6817" % cluster.namespace
    assert value_scraped_after(cluster, "slurm_nodes%s" % selector(cluster), time.time()) == 2


def test_running_jobs_go_from_zero_to_the_array_and_back(cluster):
    series = "slurm_jobs_running%s" % selector(cluster)
    before = time.time()
    assert value_scraped_after(cluster, series, before) == 0
    submitted = time.time()
    # an array whose tasks each hold a CPU until the test releases them (a file in each worker pod)
    job = cluster.sbatch("-a", "1-%d" % ARRAY_TASKS, "-n1", "-o", "/dev/null",
                         "--wrap", "while [ ! -e %s ]; do sleep 1; done" % RELEASE)
    wait_for(lambda: len(cluster.ctld("squeue", "-h", "-j", job, "-t", "RUNNING", "-o", "%i").stdout.split())
             == ARRAY_TASKS, 120, "the %d tasks of array %s running" % (ARRAY_TASKS, job))
    running_since = time.time()
    assert value_scraped_after(cluster, series, running_since) == ARRAY_TASKS
    assert value_scraped_after(cluster, "slurm_jobs_cpus_alloc%s" % selector(cluster), running_since) == ARRAY_TASKS
    partitions = query(cluster, "prometheus", "slurm_partition_cpus%s" % selector(cluster))
    assert {(r["metric"]["partition"], r["value"][1]) for r in partitions} == {("compute", "4")}
    assert value_scraped_after(cluster, 'slurm_partition_jobs_cpus_alloc{namespace="%s",partition="compute"}'
                               % cluster.namespace, running_since) == ARRAY_TASKS

    for pod in ("slurmd-0", "slurmd-1"):
        cluster.kube.exec(cluster.namespace, pod, "touch", RELEASE, container="slurmd")
    wait_for(lambda: set(cluster.ctld("sacct", "-n", "-X", "-j", job, "-o", "State").stdout.split()) == {"COMPLETED"}
             and cluster.ctld("squeue", "-h", "-j", job).stdout.strip() == "", 120, "array %s completed" % job)
    ended = time.time()
    assert value_scraped_after(cluster, series, ended) == 0
    # the whole story from Prometheus's own storage: 0 before the array, the array at its peak, 0 after
    window = int(time.time() - before) + SCRAPE_INTERVAL
    assert float(query(cluster, "prometheus", "max_over_time(%s[%ds])" % (series, window))[0]["value"][1]) == ARRAY_TASKS
    assert float(query(cluster, "prometheus", series, at=submitted)[0]["value"][1]) == 0
    cluster.timings["array_s"] = ended - submitted


def test_a_drained_node_appears_in_the_drained_series(cluster):
    drained = "slurm_nodes_drained%s" % selector(cluster)
    assert value_scraped_after(cluster, drained, time.time()) == 0
    cluster.ctld("scontrol", "update", "nodename=slurmd-1", "state=drain", "reason=metrics test")
    cluster.wait_nodes({"slurmd-0": "idle", "slurmd-1": "drain"}, 30)
    since = time.time()
    assert value_scraped_after(cluster, drained, since) == 1
    assert value_scraped_after(cluster, "slurm_nodes_drain%s" % selector(cluster), since) == 1
    # the node the test drained, and only it, is resumed
    cluster.ctld("scontrol", "update", "nodename=slurmd-1", "state=resume")
    cluster.wait_nodes({"slurmd-0": "idle", "slurmd-1": "idle"}, 30)
    assert value_scraped_after(cluster, drained, time.time()) == 0


def test_every_dashboard_panel_finds_its_series_in_prometheus(cluster):
    dashboard = json.loads(DASHBOARD.read_text())
    empty = []
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"].replace("$namespace", cluster.namespace)
            if not query(cluster, "prometheus", expr):
                empty.append("%s: %s" % (panel["title"], expr))
    assert not empty, empty
    namespaces = query(cluster, "prometheus", "count by (namespace) (slurm_nodes)")
    assert [r["metric"]["namespace"] for r in namespaces] == [cluster.namespace]


def test_a_pod_without_the_scraper_label_is_kept_out(cluster):
    start_prometheus(cluster, "stranger", {"app.kubernetes.io/name": "not-prometheus"})

    def scrapes_failed():
        counts = {r["metric"]["job"]: float(r["value"][1]) for r in query(cluster, "stranger", "count_over_time(up[5m])")}
        return set(counts) == SCRAPE_JOBS and min(counts.values()) >= 3
    wait_for(scrapes_failed, 120, "three scrapes of every job by the stranger")
    highest = {r["metric"]["job"]: r["value"][1] for r in query(cluster, "stranger", "max_over_time(up[5m])")}
    assert highest == dict.fromkeys(SCRAPE_JOBS, "0")
    cluster.kube.kubectl("delete", "pod", "stranger", "-n", MONITORING, "--wait=false")


def test_metrics_off_and_on_again_replace_no_pod_and_a_running_job_goes_on(cluster):
    """Metrics off, then on again, each by a reconfigure with no pod replaced, a job running throughout.

    The Prometheus pod is replaced before the last scrapes, and why: while the Service slurmctld-metrics was gone,
    Prometheus dialled its old ClusterIP, which no kube-proxy rule translates any more; on this machine such a
    packet leaves by the default route, and the sandbox's egress interceptor answers it with HTTP 404 on a
    keep-alive connection that Prometheus then reuses for every later scrape (seen in ss and conntrack: the
    connections to the old ClusterIP, no DNAT). On a cluster's own network that address answers nothing and the
    scraper dials again. slurmctld served every path right after the reconfigure (a request from a pod through the
    new Service: 200)."""
    kube = cluster.kube
    job = cluster.sbatch("-n1", "-o", "/dev/null", "--wrap", "while [ ! -e %s-2 ]; do sleep 1; done" % RELEASE)
    wait_for(lambda: cluster.ctld("squeue", "-h", "-j", job, "-o", "%T").stdout.strip() == "RUNNING", 120,
             "job %s running" % job)
    pods = kube.pod_identity(cluster.namespace)

    # off: the objects go, slurm.conf loses MetricsType by a reconfigure, no pod is replaced
    cluster.save(cluster_metrics_enabled=False)
    _proc, changed, _seconds = cluster.site()
    assert changed > 0
    for kind, name in (("servicemonitor", "slurmctld-metrics"), ("configmap", "slurm-dashboard"),
                       ("service", "slurmctld-metrics"), ("networkpolicy", "slurmctld-metrics")):
        assert kube.get(kind, name, namespace=cluster.namespace, check=False) is None, (kind, name)
    assert metrics_type(cluster) in (None, "(null)")
    assert kube.pod_identity(cluster.namespace) == pods

    # on again, by a reconfigure: every path the Service announces is served and scraped through the new Service
    cluster.save(cluster_metrics_enabled=True)
    _proc, changed, _seconds = cluster.site()
    assert changed > 0
    assert metrics_type(cluster) == "metrics/openmetrics"
    assert kube.pod_identity(cluster.namespace) == pods
    assert kube.get("servicemonitor", "slurmctld-metrics", namespace=cluster.namespace) is not None
    kube.kubectl("delete", "pod", "prometheus", "-n", MONITORING, "--wait=true")
    start_prometheus(cluster, "prometheus", {"app.kubernetes.io/name": "prometheus"})
    since = time.time()
    scraped_up = "(up == 1) and timestamp(up) > %f" % since
    wait_for_scrapes(cluster, lambda: {r["metric"]["job"] for r in query(cluster, "prometheus", scraped_up)}
                     == SCRAPE_JOBS, 120, "every path scraped and up after metrics were turned on again")
    assert value_scraped_after(cluster, "slurm_jobs_running%s" % selector(cluster), since) == 1

    # the job ran through both reconfigures and ends with its id
    assert cluster.ctld("squeue", "-h", "-j", job, "-o", "%T").stdout.strip() == "RUNNING"
    for pod in ("slurmd-0", "slurmd-1"):
        kube.exec(cluster.namespace, pod, "touch", RELEASE + "-2", container="slurmd")
    wait_for(lambda: cluster.ctld("sacct", "-n", "-X", "-j", job, "-o", "State").stdout.split() == ["COMPLETED"],
             120, "job %s completed" % job)
