"""Benchmark: faults of the control plane with a job running on every node and a queue of pending jobs.

Runs on the local Kubernetes of tests/localkube (tier T3), as root, after `make deps`, with nothing else using
it (the kubelet fault stops the kubelet of every cluster on this machine):

    .venv/bin/python benchmarks/control_plane_faults.py [--faults slurmctld-pod,...] [--json results.json]

One cluster (namespace slurm-faults, 2 workers of 2 CPUs, the default images) deployed by site.yml through the
API. For each fault, in turn:
  1. a job holding each worker (--exclusive, as alice, until a file in /home releases it) and three jobs pending
     behind them (Resources)
  2. the fault, at t0:
       slurmctld-pod      the pod slurmctld-0 deleted (its StatefulSet makes it again; the state is on its volume)
       slurmctld-process  SIGKILL to the slurmctld process from the host (the kubelet restarts the container)
       slurmdbd-pod       the pod slurmdbd-0 deleted
       mariadb-pod        the pod mariadb-0 deleted
       kubelet            the kubelet process killed, then started again (localkube.py start); containers run on
  3. `sbatch` as alice over SSH, once a second, until one is accepted: "sbatch again after" (from t0)
  4. every pod Ready and slurmctld answering: "pods ready after" (from t0)
  5. jobs lost: the two running jobs still RUNNING with their ids, the pending ones still PENDING
  6. site.yml: its rc and `changed` (a converge after the fault must find nothing to change)
  7. the jobs released: every job of the round (running, pending, the accepted probe) COMPLETED in sacct
     ("accounting kept": slurmctld keeps what it could not send slurmdbd, and sends it when slurmdbd is back)
Reported per fault as JSON (README, "Faults of the control plane").
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("ANSIBLE_COLLECTIONS_PATH", str(ROOT / ".cache" / "collections"))

# pylint: disable=wrong-import-position
from tests.k8s.cluster import SlurmOnKube  # noqa: E402
from tests.support.kube import LOCALKUBE, start_cluster  # noqa: E402
from tests.support.proc import collection_version, run, wait_for  # noqa: E402

NAME = "faults"
PORT = 30048
FAULTS = ("slurmctld-pod", "slurmctld-process", "slurmdbd-pod", "mariadb-pod", "kubelet")
# deadlines for a loaded 2-core machine: a fault that is not over by then is reported as such, not waited for
RECOVERY_DEADLINE = 300


def host_pids(name, container_id=None):
    """Host PIDs of the processes called `name` (those of one container when its id is given)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() != name:
                continue
            if container_id and container_id not in (entry / "cgroup").read_text():
                continue
        except OSError:
            continue
        pids.append(int(entry.name))
    return pids


def container_id(deployment, pod, container):
    status = deployment.kube.get("pod", pod, deployment.namespace)["status"]["containerStatuses"]
    return next(s["containerID"].split("://", 1)[1] for s in status if s["name"] == container)


def inject(deployment, fault):
    kube, namespace = deployment.kube, deployment.namespace
    if fault.endswith("-pod"):
        pod = fault[:-len("-pod")] + "-0"
        kube.kubectl("delete", "pod", "-n", namespace, pod, "--wait=false")
    elif fault == "slurmctld-process":
        pids = host_pids("slurmctld", container_id(deployment, "slurmctld-0", "slurmctld"))
        assert pids, "no slurmctld process of slurmctld-0 on this host"
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
    elif fault == "kubelet":
        pids = host_pids("kubelet")
        assert len(pids) == 1, pids
        os.kill(pids[0], signal.SIGKILL)
        wait_for(lambda: not host_pids("kubelet"), 30, "the kubelet gone")
        # started again at once, as systemd would (localkube waits until the node is Ready again), while the
        # round goes on probing
        restarter = threading.Thread(target=run, args=(LOCALKUBE + ["start"],), kwargs={"timeout": RECOVERY_DEADLINE})
        restarter.start()
        return restarter
    else:
        raise ValueError(fault)
    return None


def sbatch_accepted(deployment):
    proc = deployment.ssh("sbatch --parsable -o /dev/null --wrap true", timeout=60, check=False)
    return proc.stdout.strip() if proc.returncode == 0 and proc.stdout.strip().isdigit() else None


def ctld_answers(deployment):
    return deployment.ctld("scontrol", "ping", check=False, timeout=30).returncode == 0


def one_fault(deployment, fault):
    release = "/home/alice/faults-release-%s" % fault
    hold = "while [ ! -e %s ]; do sleep 0.5; done" % release
    running = [deployment.ssh("sbatch --parsable --exclusive -w %s -o /dev/null --wrap '%s'" % (node, hold)).stdout.strip()
               for node in ("slurmd-0", "slurmd-1")]
    wait_for(lambda: all(deployment.job_state(job) == "RUNNING" for job in running), 60, "both holding jobs running")
    pending = [deployment.ssh("sbatch --parsable -o /dev/null --wrap true").stdout.strip() for _n in range(3)]
    wait_for(lambda: all(deployment.job_state(job) == "PENDING" for job in pending), 30, "three jobs pending")

    t0 = time.monotonic()
    restarter = inject(deployment, fault)
    probe, sbatch_again = None, None
    while time.monotonic() - t0 < RECOVERY_DEADLINE:
        probe = sbatch_accepted(deployment)
        if probe:
            sbatch_again = time.monotonic() - t0
            break
        time.sleep(1)
    ready = None
    try:
        wait_for(lambda: deployment.pods_ready() and ctld_answers(deployment), RECOVERY_DEADLINE, "pods ready")
        ready = time.monotonic() - t0
    except AssertionError:
        pass
    if restarter is not None:
        restarter.join()
        assert host_pids("kubelet"), "localkube.py start did not start the kubelet again"
    states = {job: deployment.job_state(job) for job in running + pending}
    site, changed, seconds = deployment.site(check=False)
    deployment.ssh("touch %s" % release)
    jobs = running + pending + ([probe] if probe else [])
    try:
        wait_for(lambda: all(deployment.accounted_state(job) == ["COMPLETED"] for job in jobs), 180,
                 "every job of the round COMPLETED in sacct")
        accounted = True
    except AssertionError:
        accounted = False
    return {
        "fault": fault,
        "sbatch_again_s": round(sbatch_again, 1) if sbatch_again is not None else None,
        "pods_ready_s": round(ready, 1) if ready is not None else None,
        "running_kept": all(states[job] == "RUNNING" for job in running),
        "pending_kept": all(states[job] == "PENDING" for job in pending),
        "jobs_lost": sum(1 for job in jobs if deployment.accounted_state(job) != ["COMPLETED"]),
        "accounting_kept": accounted,
        "site_rc": site.returncode, "site_changed": changed, "site_s": round(seconds, 1),
        "site_message": None if site.returncode == 0 else site.stdout[-600:],
        "load_average": round(os.getloadavg()[0], 2),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--faults", default=",".join(FAULTS), help="comma-separated, of: %s" % ", ".join(FAULTS))
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    faults = args.faults.split(",")
    unknown = sorted(set(faults) - set(FAULTS))
    if unknown:
        parser.error("unknown fault(s): %s" % ", ".join(unknown))
    kube = start_cluster()
    tag = "%s-%s" % (collection_version(), NAME)
    kube.build_and_load_images(tag)
    deployment = SlurmOnKube(kube, Path(tempfile.mkdtemp(prefix="faults-")), NAME, tag, PORT)
    kube.delete_namespace(deployment.namespace)
    results = []
    try:
        deployment.site()
        deployment.wait_nodes({"slurmd-0": "idle", "slurmd-1": "idle"}, 120)
        deployment.wait_for_login()
        for fault in faults:
            result = one_fault(deployment, fault)
            print(json.dumps(result), flush=True)
            results.append(result)
            wait_for(lambda: deployment.pods_ready() and ctld_answers(deployment), RECOVERY_DEADLINE, "pods ready")
            deployment.wait_nodes({"slurmd-0": "idle", "slurmd-1": "idle"}, 120)
    finally:
        if os.environ.get("KEEP_E2E") != "1":
            deployment.delete()
    summary = {"slurm": run(["docker", "image", "inspect", "--format",
                             "{{index .Config.Labels \"io.github.hpc-slurm-k8s.slurm.version\"}}",
                             "hpc-slurm-k8s/slurm-daemon:%s" % tag]).stdout.strip(), "faults": results}
    print(json.dumps(summary, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
