"""Slurm's own metrics (cluster_metrics_enabled): what the metrics value set renders, and the Grafana dashboard
against the series a real Slurm 26.05 slurmctld serves.

tests/static/openmetrics-26.05/ holds what slurmctld 26.05.5 (the forky image, MetricsType=metrics/openmetrics)
answered at /metrics/jobs, /metrics/nodes, /metrics/partitions and /metrics/scheduler: every series a panel of
roles/slurmctld/files/slurm-dashboard.json queries must be one of those (T3, tests/k8s/test_metrics.py, runs each
panel's query in a real Prometheus that scrapes a running cluster).
"""

from __future__ import annotations

import json
import re

import pytest

from conftest import ROOT

DASHBOARD = ROOT / "roles" / "slurmctld" / "files" / "slurm-dashboard.json"
SAMPLES = ROOT / "tests" / "static" / "openmetrics-26.05"
SERIES = re.compile(r"\b(slurm_[a-z_]+)\b")
# PromQL words that look like series names: none of the dashboard's (a guard against a false pass)
PROMQL_FUNCTIONS = re.compile(r"\b(label_values|rate|sum|max|min|avg)\s*\(")


def served_series():
    """The series names slurmctld 26.05 served (the sample files' sample lines)."""
    names = set()
    for sample in SAMPLES.glob("*.txt"):
        names |= {line.split("{")[0].split()[0] for line in sample.read_text().splitlines()
                  if line and not line.startswith("#")}
    return names


def panel_queries():
    dashboard = json.loads(DASHBOARD.read_text())
    return [(panel["title"], target["expr"]) for panel in dashboard["panels"] for target in panel["targets"]]


def test_the_samples_are_slurms_metrics():
    names = served_series()
    assert {"slurm_nodes_idle", "slurm_jobs_running", "slurm_schedule_cycle_last",
            "slurm_partition_jobs_cpus_alloc"} <= names
    assert len(names) > 150, len(names)


def test_every_panel_queries_only_series_slurm_serves():
    served = served_series()
    queries = panel_queries()
    assert len(queries) >= 10
    missing = sorted({(title, name) for title, expr in queries for name in SERIES.findall(expr)
                      if name not in served})
    assert not missing, missing
    for title, expr in queries:
        assert SERIES.search(expr), "%s: %r queries no Slurm series" % (title, expr)
        assert '{namespace="$namespace"}' in expr, "%s: %r does not select the cluster's namespace" % (title, expr)


def test_the_dashboard_covers_what_the_issue_asks():
    """Nodes per state, jobs per state, scheduler cycle time and per-partition CPU allocation."""
    exprs = " ".join(expr for _title, expr in panel_queries())
    for series in ("slurm_nodes_idle", "slurm_nodes_alloc", "slurm_nodes_drained", "slurm_nodes_down",
                   "slurm_jobs_running", "slurm_jobs_pending", "slurm_schedule_cycle_last", "slurm_bf_cycle_last",
                   "slurm_partition_jobs_cpus_alloc", "slurm_partition_cpus"):
        assert series in exprs, series
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["namespace"]["query"]["query"] == "label_values(slurm_nodes, namespace)"
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def test_the_guard_finds_a_series_slurm_does_not_serve():
    assert "slurm_nodes_sleeping" not in served_series()
    assert not PROMQL_FUNCTIONS.search(" ".join(expr for _t, expr in panel_queries()))


def test_metrics_value_set_renders_the_service_policy_monitor_and_dashboard(renders):
    run = renders["metrics"]
    conf = run.get("ConfigMap", "slurm-config")["data"]["slurm.conf"]
    assert "\nMetricsType=metrics/openmetrics\n" in conf
    service = run.get("Service", "slurmctld-metrics")
    paths = ["/metrics/jobs", "/metrics/nodes", "/metrics/partitions", "/metrics/scheduler", "/metrics/jobs-users-accts"]
    assert service["metadata"]["annotations"]["hpc.slurm-k8s/metrics-paths"] == ",".join(paths)
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 6817, "targetPort": "slurmctld", "protocol": "TCP"}]
    pod_labels = run.get("StatefulSet", "slurmctld")["spec"]["template"]["metadata"]["labels"]
    assert all(pod_labels.get(k) == v for k, v in service["spec"]["selector"].items())
    monitor = run.get("ServiceMonitor", "slurmctld-metrics")
    assert [e["path"] for e in monitor["spec"]["endpoints"]] == paths
    assert {e["interval"] for e in monitor["spec"]["endpoints"]} == {"15s"}
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert all(service["metadata"]["labels"].get(k) == v for k, v in monitor["spec"]["selector"]["matchLabels"].items())
    dashboard = run.get("ConfigMap", "slurm-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["slurm.json"]) == json.loads(DASHBOARD.read_text())


@pytest.mark.parametrize("value_set", ["defaults", "hostnet-privileged"])
def test_without_metrics_nothing_of_them_is_rendered(renders, value_set):
    run = renders[value_set]
    assert "MetricsType" not in run.get("ConfigMap", "slurm-config")["data"]["slurm.conf"]
    assert run.get("Service", "slurmctld-metrics") is None and run.get("NetworkPolicy", "slurmctld-metrics") is None
    assert not run.by_kind("ServiceMonitor") and run.get("ConfigMap", "slurm-dashboard") is None
