"""Benchmark: a slurm.conf change to every slurmd running it, configless nodes vs mounted files, side by side.

Runs on the local Kubernetes of tests/localkube (tier T3), as root, after `make deps`:

    .venv/bin/python benchmarks/reconfigure_reach.py [--rounds 3] [--workers 2] [--json results.json]

  deploy    two clusters with the same images and 2 workers each (site.yml through the Kubernetes API):
            `mounted` (cluster_configless: false: every Slurm pod mounts the ConfigMap slurm-config) and
            `configless` (the default: slurmd and login fetch the configuration from slurmctld)
  rounds    on each cluster in turn, site.yml with SlurmdDebug switched (debug, info, debug, ...): a setting
            each slurmd reads itself. The round is measured from the logs the container runtime stamps
            (one clock, the host's): slurmctld's "Processing Reconfiguration Request" and each slurmd's
            "slurmd started on" after it (24.11 re-executes slurmd at a reconfigure), then every slurmd asked
            which level it runs (`scontrol show slurmd` in its pod) right after the run
Reported per cluster (medians over the rounds, and each round): the playbook time; from the playbook's start
to the last slurmd running the new configuration; from the reconfigure to that moment; the API writes of the
run (the ConfigMap and the pod annotations that make kubelets refresh their copies); and whether every slurmd
ran the new level when the run ended.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("ANSIBLE_COLLECTIONS_PATH", str(ROOT / ".cache" / "collections"))

# pylint: disable=wrong-import-position
from tests.k8s.cluster import SlurmOnKube  # noqa: E402
from tests.support.kube import start_cluster  # noqa: E402
from tests.support.proc import collection_version  # noqa: E402

LEVELS = {"info": "3", "debug": "5"}   # SlurmdDebug -> the number `scontrol show slurmd` prints
STAMPED = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?Z (.*)$")


def stamped_lines(kube, namespace, pod, container):
    """(epoch seconds, text) of every line of the container's log, as the container runtime stamped it."""
    out = kube.kubectl("-n", namespace, "logs", "--timestamps", pod, "-c", container).stdout
    lines = []
    for line in out.splitlines():
        found = STAMPED.match(line)
        if found:
            when = datetime.fromisoformat(found.group(1) + "+00:00").timestamp() + float("0." + (found.group(2) or "0"))
            lines.append((when, found.group(3)))
    return lines


def one_round(deployment, level):
    kube = deployment.kube
    position = kube.audit_position()
    deployment.save(config_slurm_conf={"SlurmdDebug": level})
    started = time.time()
    _proc, changed, seconds = deployment.site()
    assert changed > 0
    levels = deployment.slurmd_debug_levels()
    reconfigured = [when for when, text in stamped_lines(kube, deployment.namespace, "slurmctld-0", "slurmctld")
                    if when >= started and "Processing Reconfiguration Request" in text]
    assert reconfigured, "no reconfigure in slurmctld's log"
    running = {}
    for pod in kube.pods(deployment.namespace, "app.kubernetes.io/name=slurmd"):
        running[pod] = min(when for when, text in stamped_lines(kube, deployment.namespace, pod, "slurmd")
                           if when >= reconfigured[-1] and "slurmd started on" in text)
    writes = kube.writes_since(position, deployment.namespace)
    return {
        "playbook_s": round(seconds, 2),
        "start_to_every_slurmd_s": round(max(running.values()) - started, 2),
        "reconfigure_to_every_slurmd_s": round(max(running.values()) - reconfigured[-1], 3),
        "api_writes": len(writes),
        "pods_annotated": sorted(w["objectRef"]["name"] for w in writes if w["objectRef"]["resource"] == "pods"),
        "every_slurmd_at_new_level_when_run_ended": set(levels.values()) == {LEVELS[level]},
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3, help="changes per cluster (default 3)")
    parser.add_argument("--workers", type=int, default=2, help="slurmd pods per cluster (default 2)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    kube = start_cluster()
    tag = "%s-bench" % collection_version()
    kube.build_and_load_images(tag)
    workdir = Path(tempfile.mkdtemp(prefix="reconfigure-reach-"))
    clusters = {}
    for number, (name, configless) in enumerate((("mounted", False), ("configless", True))):
        (workdir / name).mkdir()
        clusters[name] = SlurmOnKube(kube, workdir / name, "rc%s" % name[:4], tag, 30066 + number,
                                     slurmd_replicas=args.workers, cluster_configless=configless)
    results = {name: [] for name in clusters}
    try:
        for deployment in clusters.values():
            kube.delete_namespace(deployment.namespace)
            deployment.site()
            deployment.wait_nodes({"slurmd-%d" % n: "idle" for n in range(args.workers)}, 120)
        for number in range(args.rounds):
            level = "debug" if number % 2 == 0 else "info"
            for name, deployment in clusters.items():
                results[name].append(one_round(deployment, level))
    finally:
        if os.environ.get("KEEP_E2E") != "1":
            for deployment in clusters.values():
                deployment.delete()
    summary = {"workers": args.workers, "rounds": args.rounds, "load_average": os.getloadavg()[0]}
    for name, rounds in results.items():
        summary[name] = {key: statistics.median(r[key] for r in rounds)
                         for key in ("playbook_s", "start_to_every_slurmd_s", "reconfigure_to_every_slurmd_s", "api_writes")}
        summary[name]["every_round_every_slurmd_at_new_level"] = all(r["every_slurmd_at_new_level_when_run_ended"] for r in rounds)
        summary[name]["rounds"] = rounds
    print(json.dumps(summary, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
