"""Benchmark: the web portal (cluster_portal_enabled), click on *Start* to a usable notebook, in a real browser;
on an idle worker that runs, and on a burst node that power saving has powered down, side by side in one run.

Runs on the local Kubernetes of tests/localkube (tier T3), as root, after `make deps`:

    .venv/bin/python benchmarks/portal_start.py [--rounds 3] [--json results.json] [--keep]

It deploys namespace slurm-portalbench (the images of tests/k8s/test_portal.py, present after that module or
built here): one always-on worker (partition compute) and a burst group of one node (partition burst, power
saving: Slurm creates its pod when a job needs it and deletes it SuspendTime after), both running the notebook
image; the portal on NodePort 30057 (the test module's: do not run both at once). Then, --rounds times for
each partition, Debian's Chromium logs in as alice, picks the partition and clicks *Start*; the time runs until
JupyterLab's launcher is shown (the notebook job submitted, started, its server up and routed). Each server is
stopped and its job gone before the next round; before each burst round the burst node is powered down again
(`idle~`), so every burst start includes creating its pod.

  running_s        seconds per round on the always-on worker (its node idle, the image present)
  powered_down_s   seconds per round on the burst partition (node powered down: pod created, slurmd registers)
  ratio_median     median(powered_down_s) / median(running_s)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.k8s.cluster import SlurmOnKube  # noqa: E402
from tests.k8s.test_portal import (PASSWORD, URL, WEB_PORT, bcrypt_hash, chrome, log_in, notebook_jobs,  # noqa: E402
                                   wait)
from tests.support.kube import start_cluster  # noqa: E402
from tests.support.proc import collection_version, wait_for  # noqa: E402

BURST_NODE = "slurmd-burst-0"
SUSPEND_TIME = 10


def start_seconds(cluster, driver, partition):
    """Log in, choose the partition, click Start: seconds until JupyterLab's launcher shows; the node it ran on."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    log_in(driver, "alice", PASSWORD)
    wait(driver, lambda d: d.find_elements(By.ID, "partition"), 60, "the options form")
    Select(driver.find_element(By.ID, "partition")).select_by_value(partition)
    started = time.monotonic()
    driver.find_element(By.CSS_SELECTOR, "form input[type=submit], form button[type=submit]").click()
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".jp-LauncherCard"), 600, "JupyterLab's launcher")
    seconds = time.monotonic() - started
    driver.shot("lab-%s" % partition)
    (job,) = notebook_jobs(cluster)
    node = cluster.ctld("squeue", "-h", "-j", job, "-o", "%N").stdout.strip()
    driver.get(URL + "/hub/home")
    wait(driver, lambda d: d.find_elements(By.ID, "stop"), 60, "the Stop My Server button")
    driver.find_element(By.ID, "stop").click()
    wait_for(lambda: notebook_jobs(cluster) == {}, 120, "the notebook job to leave the queue")
    return seconds, node


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep the namespace afterwards")
    args = parser.parse_args()
    tag = "%s-portal" % collection_version()
    notebook = "hpc-slurm-k8s/slurm-notebook:%s" % tag
    kube = start_cluster()
    kube.build_and_load_images(tag, portal=True)
    with tempfile.TemporaryDirectory(prefix="bench-portal-") as tmp:
        cluster = SlurmOnKube(kube, Path(tmp), "portalbench", tag, 30078, slurmd_replicas=1, slurmd_image=notebook)
        cluster.save(
            cluster_portal_enabled=True, portal_service_type="NodePort", portal_node_port=WEB_PORT,
            portal_users=[{"name": "alice", "password_hash": bcrypt_hash("hpc-slurm-k8s/slurm-portal:%s" % tag, PASSWORD)}],
            portal_job_options={"partitions": ["compute", "burst"], "cpus": {"default": 1, "max": 1},
                                "memory_mb": {"default": 256, "max": 512}, "time_minutes": {"default": 30, "max": 60}},
            powersave_groups=[{"name": "burst", "count": 1, "cpus": 1, "memory_mib": 1024, "cpu_request": "50m",
                               "image": notebook, "suspend_time": SUSPEND_TIME, "suspend_timeout": 30,
                               "resume_timeout": 300}])
        kube.delete_namespace(cluster.namespace)
        cluster.site()
        screenshots = Path(tmp) / "screenshots"
        screenshots.mkdir()
        driver = chrome(screenshots)
        figures = {"rounds": args.rounds, "running_s": [], "powered_down_s": []}
        try:
            for _round in range(args.rounds):
                seconds, node = start_seconds(cluster, driver, "compute")
                assert node == "slurmd-0", node
                figures["running_s"].append(round(seconds, 1))
            for _round in range(args.rounds):
                # powered down: Slurm deleted its pod SuspendTime after the last job, and says so (idle~)
                wait_for(lambda: cluster.ctld("sinfo", "-h", "-n", BURST_NODE, "-o", "%t").stdout.strip() == "idle~",
                         300, "%s powered down" % BURST_NODE)
                seconds, node = start_seconds(cluster, driver, "burst")
                assert node == BURST_NODE, node
                figures["powered_down_s"].append(round(seconds, 1))
        finally:
            driver.quit()
        figures["ratio_median"] = round(statistics.median(figures["powered_down_s"])
                                        / statistics.median(figures["running_s"]), 2)
        if not args.keep:
            cluster.delete()
    print(json.dumps(figures, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
