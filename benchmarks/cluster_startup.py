"""Benchmark: the local Kubernetes' start, site.yml through its API to the first job COMPLETED, the
writes of a no-op re-run, and the image sizes.

Runs on the local Kubernetes of tests/localkube (tier T3), as root, after `make deps`:

    .venv/bin/python benchmarks/cluster_startup.py [--json results.json]

  cluster_start_s   `localkube.py stop` then `start` (state kept, as on a machine rebooted): every
                    component up and the node Ready
  site_first_run_s  ansible-playbook playbooks/site.yml into a new namespace (images present)
  first_job_s       from the start of site.yml to a user's `sbatch --wait` job COMPLETED in sacct
                    (the job is submitted over SSH to the login pod's NodePort)
  rerun_s, rerun_writes   site.yml again with the same variables, and the write requests the API
                    server's audit log shows for it (target: 0)
  user_added_s      from the start of site.yml with one more user (and key) to that user's first
                    `ssh` + `srun` (target 90), and the pods restarted by it (target: 0)
  kubelet_refresh_s side by side: the users ConfigMap changed alone (no pod annotated), until the login
                    pod resolves the new user: the kubelet's own refresh (syncFrequency, 1 min by default)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.k8s.cluster import SlurmOnKube  # noqa: E402
from tests.support.kube import LOCALKUBE, images_of, start_cluster  # noqa: E402
from tests.support.proc import collection_version, run, wait_for  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()
    tag = collection_version()
    figures = {}
    kube = start_cluster()
    kube.build_and_load_images(tag)
    run(LOCALKUBE + ["stop"], timeout=600)
    started = time.monotonic()
    kube = start_cluster()
    figures["cluster_start_s"] = round(time.monotonic() - started, 1)
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        cluster = SlurmOnKube(kube, Path(tmp), "bench", tag, 30082, slurmd_cpus=1)
        kube.delete_namespace(cluster.namespace)
        started = time.monotonic()
        _proc, _changed, seconds = cluster.site()
        figures["site_first_run_s"] = round(seconds, 1)
        job = cluster.ssh("sbatch --parsable --wait -o /dev/null --wrap hostname").stdout.strip()
        wait_for(lambda: cluster.accounted_state(job) == ["COMPLETED"], 300, "job %s COMPLETED" % job, interval=0.2)
        figures["first_job_s"] = round(time.monotonic() - started, 1)
        position = kube.audit_position()
        _proc, changed, seconds = cluster.site()
        figures["rerun_s"], figures["rerun_changed"] = round(seconds, 1), changed
        figures["rerun_writes"] = len(kube.writes_since(position, cluster.namespace))
        before = kube.pod_identity(cluster.namespace)
        key = Path(tmp) / "carol_ed25519"
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key])
        cluster.save(config_users=cluster.variables["config_users"] + [
            {"name": "carol", "uid": 2003, "authorized_keys": [key.with_suffix(".pub").read_text().strip()]}])
        started = time.monotonic()
        cluster.site()
        wait_for(lambda: cluster.ssh("srun -N1 id -un", user="carol", key=key, check=False, timeout=60).stdout.strip()
                 == "carol", 300, "carol's first ssh + srun", interval=0.2)
        figures["user_added_s"] = round(time.monotonic() - started, 1)
        figures["user_added_pods_restarted"] = len([pod for pod, identity in kube.pod_identity(cluster.namespace).items()
                                                    if before.get(pod) != identity])
        login = next(iter(kube.pods(cluster.namespace, "app.kubernetes.io/name=login")))
        users = kube.get("configmap", "slurm-users", cluster.namespace)["data"]
        users["passwd"] += "dave:*:2004:2004::/home/dave:/bin/bash\n"
        started = time.monotonic()
        kube.kubectl("patch", "configmap", "slurm-users", "-n", cluster.namespace, "--type", "merge",
                     "-p", json.dumps({"data": {"passwd": users["passwd"]}}))
        wait_for(lambda: kube.exec(cluster.namespace, login, "getent", "passwd", "dave", check=False).returncode == 0,
                 300, "the login pod to resolve dave by the kubelet's own refresh", interval=0.5)
        figures["kubelet_refresh_s"] = round(time.monotonic() - started, 1)
        cluster.delete()
    sizes = {}
    for image in images_of(tag):
        sizes[image] = round(int(run(["/usr/bin/docker", "image", "inspect", "-f", "{{.Size}}", image]).stdout) / 1e6)
    figures["image_sizes_mb"] = sizes
    print(json.dumps(figures, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
