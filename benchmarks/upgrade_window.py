"""Benchmark: the maintenance window (drain to resume) of upgrade.yml: no-op, config-only and image upgrades.

Runs on the local Kubernetes of tests/localkube (tier T3), as root, after `make deps`; uses the
namespace, images and settings of tests/k8s/test_day2.py (do not run both at once):

    .venv/bin/python benchmarks/upgrade_window.py [--repeat N] [--json results.json]

  deploy   site.yml through the Kubernetes API (2 workers, images tagged day2-old)
  noop     upgrade.yml with the same variables: the plan finds nothing, so nothing is drained (no
           window; the playbook time is reported)
  config   upgrade.yml with one slurm.conf value changed: plan (before the drain), drain, reconfigure,
           verify, resume
  phased   another such change as three runs (upgrade_phase pre, apply, post), as an AWX workflow
           runs it: the apply phase has no plan and runs every role (the window includes the time
           between the runs, as an approval would; here none)
  image    upgrade.yml -e cluster_image_tag=day2-new (built here as Slurm 24.11 too: another version
           label, so another image id): dump, slurmdbd -> slurmctld -> slurmd -> login replaced, verified,
           resumed; then back to day2-old (a second image upgrade). The upgrade across Slurm majors is
           benchmarks/upgrade_major.py
The window is what upgrade.yml prints ("maintenance window N s"): from just before the drain to the
resume; the whole playbook time is reported beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("ANSIBLE_COLLECTIONS_PATH", str(ROOT / ".cache" / "collections"))

# pylint: disable=wrong-import-position
from tests.k8s.cluster import SlurmOnKube  # noqa: E402
from tests.k8s.test_day2 import NAME, NEW, OLD, OLD_MAJOR, WINDOW  # noqa: E402
from tests.support.kube import start_cluster  # noqa: E402


NO_WINDOW = "no maintenance window (nothing to roll out: no node was drained)"


def upgrade(deployment, *extra):
    proc, _changed, seconds = deployment.playbook("upgrade", *extra)
    return float(WINDOW.search(proc.stdout).group(1)), seconds


def max_job_count(deployment, value):
    """A slurm.conf change that restarts nothing (scontrol reconfigure), to be rolled out."""
    deployment.save(config_slurm_conf={"MaxJobCount": value})


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeat", type=int, default=1, help="upgrades of each kind (default 1)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    kube = start_cluster()
    for tag in (OLD, NEW):   # one major: there and back
        kube.build_and_load_images(tag, slurm_major=OLD_MAJOR)
    deployment = SlurmOnKube(kube, Path(tempfile.mkdtemp(prefix="upgrade-window-")), NAME, OLD, 30042, slurmd_cpus=1)
    deployment.save(upgrade_backup_dir=str(deployment.workdir / "backups"))
    kube.delete_namespace(deployment.namespace)
    results = {"noop_playbook_s": [], "config_window_s": [], "config_playbook_s": [], "phased_window_s": [],
               "image_window_s": [], "image_playbook_s": []}
    try:
        deployment.playbook("site")
        deployment.wait_nodes({"slurmd-0": "idle", "slurmd-1": "idle"}, 90)
        for number in range(args.repeat):
            proc, _changed, seconds = deployment.playbook("upgrade")
            assert NO_WINDOW in proc.stdout, proc.stdout[-3000:]
            results["noop_playbook_s"].append(round(seconds, 1))
            max_job_count(deployment, 20000 + 2 * number)
            window, seconds = upgrade(deployment)
            results["config_window_s"].append(window)
            results["config_playbook_s"].append(round(seconds, 1))
            max_job_count(deployment, 20001 + 2 * number)
            for phase in ("pre", "apply"):
                deployment.playbook("upgrade", "-e", "upgrade_phase=%s" % phase)
            window, seconds = upgrade(deployment, "-e", "upgrade_phase=post")
            results["phased_window_s"].append(window)
            for tag in (NEW, OLD):
                window, seconds = upgrade(deployment, "-e", "cluster_image_tag=%s" % tag)
                results["image_window_s"].append(window)
                results["image_playbook_s"].append(round(seconds, 1))
    finally:
        deployment.delete()
    config = statistics.median(results["config_window_s"])
    summary = dict(results, config_window_median_s=config,
                   phased_over_planned_config_window=round(statistics.median(results["phased_window_s"]) / config, 1),
                   image_window_median_s=statistics.median(results["image_window_s"]),
                   load_average=os.getloadavg()[0])
    print(json.dumps(summary, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
