"""Benchmark: a scrape of Slurm's own metrics (cluster_metrics_enabled, metrics/openmetrics of Slurm 26.05)
with 1,000 jobs in the queue and 64 nodes, side by side with what a command-based exporter runs for the same
figures (squeue, sinfo and sdiag with --json), in the same pod.

Runs on the local Kubernetes of tests/localkube (tier T3), as root, after `make deps`:

    .venv/bin/python benchmarks/metrics_scrape.py [--jobs 1000] [--nodes 64] [--rounds 30] [--json results.json]

It deploys a cluster of Slurm 26.05 images with metrics on into namespace slurm-metricsbench: one worker pod
(a running slurmd) and --nodes - 1 more nodes defined in slurm.conf with State=DOWN and no slurmd behind them
(this machine cannot run 64 slurmd pods; slurmctld keeps a record of each, counts it in the partition compute
and serves its series as for a node that runs). It submits --jobs held jobs (one sbatch each, so the queue holds that many job records),
then in the slurmctld pod alternates, --rounds times: one scrape (a GET of each of /metrics/jobs, /metrics/nodes,
/metrics/partitions and /metrics/scheduler on slurmctld's port, as Prometheus does through the Service, the
bodies read whole), and `squeue --json`, `sinfo --json` and `sdiag --json` (new processes, output read whole).

  scrape_p50_s, scrape_p99_s      the four GETs of one scrape, together
  <path>_p50_s                    each GET alone (median)
  commands_p50_s, commands_p99_s  squeue, sinfo and sdiag --json, together
  ratio_p50                       scrape_p50_s / commands_p50_s
  scrape_bytes, series            size of one scrape and its number of samples
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.k8s.cluster import SlurmOnKube  # noqa: E402
from tests.support.kube import start_cluster  # noqa: E402
from tests.support.proc import collection_version, wait_for  # noqa: E402
from tests.support.stats import percentile  # noqa: E402

PATHS = ("jobs", "nodes", "partitions", "scheduler")
# Runs in the slurmctld pod: alternate the two ways, so that both see the same load and queue.
MEASURE = r"""
import json, subprocess, sys, time, urllib.request
rounds, paths = int(sys.argv[1]), sys.argv[2].split(",")
def get(path):
    with urllib.request.urlopen("http://127.0.0.1:6817/metrics/" + path, timeout=60) as response:
        return response.read()
def commands():
    return sum(len(subprocess.run([command, "--json"], check=True, capture_output=True).stdout)
               for command in ("squeue", "sinfo", "sdiag"))
times = {"scrape": [], "commands": [], **{path: [] for path in paths}}
body = b""
for _ in range(rounds):
    started = time.monotonic()
    body = b""
    for path in paths:
        one = time.monotonic()
        body += get(path)
        times[path].append(time.monotonic() - one)
    times["scrape"].append(time.monotonic() - started)
    started = time.monotonic()
    commands()
    times["commands"].append(time.monotonic() - started)
series = sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))
print(json.dumps({"times": times, "bytes": len(body), "series": series}))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep the namespace afterwards")
    args = parser.parse_args()
    # the images of tests/k8s/test_metrics.py (Slurm 26.05): a second build of them costs nothing
    tag = "%s-metrics" % collection_version()
    kube = start_cluster()
    kube.build_and_load_images(tag, slurm_major="26.05")
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as tmp:
        cluster = SlurmOnKube(kube, Path(tmp), "metricsbench", tag, 30076, slurmd_replicas=1,
                              cluster_metrics_enabled=True,
                              config_nodes=[{"NodeName": "bench[1-%d]" % (args.nodes - 1), "NodeAddr": "127.0.0.1",
                                             "CPUs": 2, "RealMemory": 1024, "State": "DOWN"}])
        kube.delete_namespace(cluster.namespace)
        cluster.site()
        # the worker registered (idle) beside the nodes without slurmd
        wait_for(lambda: cluster.ctld("sinfo", "-h", "-n", "slurmd-0", "-o", "%t").stdout.strip() == "idle", 120,
                 "slurmd-0 idle")
        nodes = len(cluster.ctld("scontrol", "show", "node", "-o").stdout.splitlines())
        assert nodes == args.nodes, nodes
        cluster.ctld("sh", "-c", "for i in $(seq %d); do sbatch --hold -o /dev/null --wrap true >/dev/null || exit 1; done"
                     % args.jobs, timeout=1800)
        out = cluster.ctld("python3", "-c", MEASURE, str(args.rounds), ",".join(PATHS), timeout=3600).stdout
        measured = json.loads(out)
        times = measured["times"]
        figures = {"jobs": args.jobs, "nodes": nodes, "rounds": args.rounds, "scrape_bytes": measured["bytes"],
                   "series": measured["series"]}
        for name in ("scrape", "commands"):
            figures["%s_p50_s" % name] = round(percentile(times[name], 0.50), 4)
            figures["%s_p99_s" % name] = round(percentile(times[name], 0.99), 4)
        for path in PATHS:
            figures["%s_p50_s" % path] = round(percentile(times[path], 0.50), 4)
        figures["ratio_p50"] = round(figures["scrape_p50_s"] / figures["commands_p50_s"], 3)
        if not args.keep:
            cluster.delete()
    print(json.dumps(figures, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
