"""Benchmark: the Slurm-aware rollout of idle workers to a new image, one and two pods at a time.

Runs on the local Kubernetes of tests/localkube (tier T3), as root, after `make deps`; uses the
images of tests/k8s/test_day2.py (tags day2-old, day2-new: the same build with another version label)
and a namespace of its own (slurm-rollout):

    .venv/bin/python benchmarks/rollout.py [--workers 4] [--json results.json]

  deploy  site.yml through the Kubernetes API with 4 idle workers (CPU request 250m each, so that
          they fit this 2-core machine; Slurm still sees CPUs=1)
  one     site.yml -e cluster_image_tag=day2-new, slurmd_rollout_max_unavailable 1
  two     site.yml back to day2-old, slurmd_rollout_max_unavailable 2
For each: the whole site.yml time (it also replaces slurmdbd, slurmctld and login, the same in both),
and the most workers unavailable at once, from the API server: each worker pod is unavailable from the
collection's delete request (audit log) until its successor's Ready condition; the figure is the
largest number of these intervals that overlap. It must never exceed the setting.
"""

from __future__ import annotations

import argparse
import calendar
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("ANSIBLE_COLLECTIONS_PATH", str(ROOT / ".cache" / "collections"))

# pylint: disable=wrong-import-position
from tests.k8s.cluster import SlurmOnKube  # noqa: E402
from tests.k8s.test_day2 import NEW, OLD  # noqa: E402
from tests.support.kube import start_cluster  # noqa: E402


def _seconds(stamp):
    """Seconds since the epoch of an API time stamp (with or without fractions of a second)."""
    whole, _dot, fraction = stamp.rstrip("Z").partition(".")
    return calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) + (float("0." + fraction) if fraction else 0.0)


def most_unavailable(deployment, position):
    """The largest number of worker pods unavailable at once since `position` of the audit log."""
    deleted = {}
    for write in deployment.kube.writes_since(position, deployment.namespace):
        ref = write["objectRef"]
        if write["verb"] == "delete" and ref["resource"] == "pods" and ref.get("name", "").startswith("slurmd-"):
            deleted[ref["name"]] = _seconds(write["requestReceivedTimestamp"])
    pods = deployment.kube.pods(deployment.namespace, "app.kubernetes.io/name=slurmd")
    events = []
    for name, start in deleted.items():
        ready = next(c["lastTransitionTime"] for c in pods[name]["status"]["conditions"] if c["type"] == "Ready")
        events += [(start, 1), (_seconds(ready), -1)]
    current = peak = 0
    for _when, step in sorted(events, key=lambda event: (event[0], event[1])):
        current += step
        peak = max(peak, current)
    return peak, sorted(deleted)


def rollout(deployment, tag, max_unavailable):
    position = deployment.kube.audit_position()
    deployment.save(cluster_image_tag=tag, slurmd_rollout_max_unavailable=max_unavailable)
    _proc, _changed, seconds = deployment.site()
    peak, replaced = most_unavailable(deployment, position)
    return {"site_s": round(seconds, 1), "most_unavailable": peak, "replaced": replaced}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--workers", type=int, default=4, help="slurmd replicas (default 4)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    kube = start_cluster()
    for tag in (OLD, NEW):
        kube.build_and_load_images(tag)
    deployment = SlurmOnKube(kube, Path(tempfile.mkdtemp(prefix="rollout-")), "rollout", OLD, 30052,
                             slurmd_replicas=args.workers, slurmd_cpus=1, slurmd_cpu_request="250m")
    kube.delete_namespace(deployment.namespace)
    try:
        deployment.site()
        idle = {"slurmd-%d" % n: "idle" for n in range(args.workers)}
        deployment.wait_nodes(idle, 120)
        one = rollout(deployment, NEW, 1)
        deployment.wait_nodes(idle, 120)
        two = rollout(deployment, OLD, 2)
        deployment.wait_nodes(idle, 120)
    finally:
        deployment.delete()
    summary = {"workers": args.workers, "max_unavailable_1": one, "max_unavailable_2": two,
               "site_s_ratio_1_over_2": round(one["site_s"] / two["site_s"], 2),
               "load_average": os.getloadavg()[0]}
    print(json.dumps(summary, indent=1))
    assert one["most_unavailable"] <= 1 and two["most_unavailable"] <= 2, summary
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
