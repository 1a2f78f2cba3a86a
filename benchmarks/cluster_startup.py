"""Benchmark: from rendered manifests to the first job COMPLETED, warm and cold, and image sizes.

Runs on the Docker harness (tier T3), as root, after `make deps` and with Docker running
(tests/harness/start-docker.sh):

    .venv/bin/python benchmarks/cluster_startup.py [--cold] [--json results.json]

  render   ansible-playbook playbooks/site.yml in render mode (writes the manifests, no render command)
  warm     images present: kdock apply --wait of the rendered directory, then `sbatch --wait` as a user
           until sacct shows the job COMPLETED
  cold     (--cold) the Slurm images and the build cache are removed first and rebuilt by
           tests/harness/build-images.sh (the debian:trixie-slim base stays: a real build pulls it);
           then as warm
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / "tests" / "harness"
DOCKER = "/usr/bin/docker"
KDOCK = [sys.executable, str(HARNESS / "kdock.py")]
NAMESPACE = "slurm-bench"


def run(argv, timeout=1800, **kwargs):
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, **kwargs)
    if proc.returncode != 0:
        raise RuntimeError("%s failed (rc=%s)\n%s\n%s" % (" ".join(map(str, argv)), proc.returncode,
                                                          proc.stdout[-3000:], proc.stderr[-3000:]))
    return proc


def version():
    return re.search(r"^version:\s*(\S+)", (ROOT / "galaxy.yml").read_text(), re.M).group(1)


def images(tag):
    return ["hpc-slurm-k8s/slurm:%s" % tag, "hpc-slurm-k8s/slurm-daemon:%s" % tag, "hpc-slurm-k8s/mariadb-test:%s" % tag]


def image_sizes(tag):
    sizes = {}
    for image in images(tag):
        size = run([DOCKER, "image", "inspect", "-f", "{{.Size}}", image]).stdout.strip()
        sizes[image] = round(int(size) / 1e6)
    return sizes


def render(workdir, tag):
    render_dir = workdir / "render"
    variables = {
        "cluster_name": "bench", "cluster_render_dir": str(render_dir), "storage_class": "harness-rwx",
        "database_image": "hpc-slurm-k8s/mariadb-test:%s" % tag, "slurmd_replicas": 2, "slurmd_cpus": 1,
        "slurmd_memory_mib": 1024, "config_users": [{"name": "alice", "uid": 2001}],
    }
    workdir.mkdir(parents=True, exist_ok=True)
    vars_file = workdir / "vars.json"
    vars_file.write_text(json.dumps(variables))
    started = time.monotonic()
    run(["ansible-playbook", str(ROOT / "playbooks" / "site.yml"), "-e", "@%s" % vars_file])
    return render_dir, time.monotonic() - started


def first_job(render_dir):
    """kdock apply --wait, then a user's batch job until sacct says COMPLETED; returns seconds."""
    started = time.monotonic()
    run(KDOCK + ["apply", str(render_dir), "--wait", "--timeout", "600"])
    applied = time.monotonic() - started
    login = run(KDOCK + ["status", NAMESPACE]).stdout
    login_pod = re.search(r"\s(login-\S+)\s", login).group(1)
    container = run(KDOCK + ["container-name", NAMESPACE, login_pod]).stdout.strip()
    job = run([DOCKER, "exec", container, "runuser", "-u", "alice", "--", "sbatch", "--parsable", "--wait",
               "-o", "/dev/null", "--wrap", "hostname"], timeout=300).stdout.strip()
    ctld = run(KDOCK + ["container-name", NAMESPACE, "slurmctld-0"]).stdout.strip()
    while run([DOCKER, "exec", ctld, "sacct", "-n", "-X", "-j", job, "-o", "State"]).stdout.split() != ["COMPLETED"]:
        if time.monotonic() - started > 600:
            raise RuntimeError("job %s not COMPLETED in sacct after 600 s" % job)
        time.sleep(0.2)
    return applied, time.monotonic() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cold", action="store_true", help="also measure with image builds (removes the images first)")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()
    tag = version()
    env_path = "%s:%s" % (ROOT / ".venv" / "bin", os.environ.get("PATH", ""))
    os.environ.update(PATH=env_path, ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".cache" / "collections"))
    run([str(HARNESS / "start-docker.sh")])
    figures = {}
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        workdir = Path(tmp)
        rounds = ["cold", "warm"] if args.cold else ["warm"]
        for kind in rounds:
            run(KDOCK + ["delete", "--namespace", NAMESPACE, "--volumes"])
            build_s = 0.0
            if kind == "cold":
                run([DOCKER, "image", "rm", "-f", *images(tag)])
                run([DOCKER, "builder", "prune", "-af"])
                started = time.monotonic()
                run(["bash", str(HARNESS / "build-images.sh"), tag], timeout=3600)
                build_s = time.monotonic() - started
            else:
                run(["bash", str(HARNESS / "build-images.sh"), tag], timeout=3600)
            render_dir, render_s = render(workdir / kind, tag)
            applied_s, job_s = first_job(render_dir)
            figures[kind] = {"image_builds_s": round(build_s, 1), "render_s": round(render_s, 1),
                             "apply_ready_s": round(applied_s, 1), "manifests_to_first_job_s": round(job_s, 1),
                             "total_s": round(build_s + job_s, 1)}
        run(KDOCK + ["delete", "--namespace", NAMESPACE, "--volumes"])
    figures["image_sizes_mb"] = image_sizes(tag)
    print(json.dumps(figures, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
