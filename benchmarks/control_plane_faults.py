"""Benchmark: faults of the control plane with a job running on every node and a queue of pending jobs.

Runs on the local Kubernetes of tests/localkube (tier T3), as root, after `make deps`, with nothing else using
it (the kubelet fault stops the kubelet of every cluster on this machine):

    .venv/bin/python benchmarks/control_plane_faults.py [--faults slurmctld-pod,...] [--json results.json]

One cluster (namespace slurm-faults, 2 workers of 2 CPUs, the default images) deployed by site.yml through the
API. For each fault, in turn:
  1. a job holding each worker (--exclusive, as alice, until a file in /home releases it) and three jobs pending
     behind them (Resources)
     and, but for the -unsaved fault, slurmctld's job_state file written after the last of them
  2. the fault, at t0:
       slurmctld-pod      the pod slurmctld-0 deleted (its StatefulSet makes it again; the state is on its volume)
       slurmctld-process  SIGKILL to the slurmctld process (the OOM killer's way; the kubelet restarts the container)
       slurmctld-process-unsaved  the same, within a second of the last submission, before slurmctld's background
                          save (at most 5 s after a change, Slurm's SAVE_MAX_WAIT) wrote those jobs: Slurm's window
       slurmdbd-pod       the pod slurmdbd-0 deleted
       mariadb-pod        the pod mariadb-0 deleted
       kubelet            the kubelet process killed, then started again (localkube.py start); containers run on
       api-during-site    the API gone (tests/support/apiproxy.py) at site.yml's "Apply slurmd"; then site.yml again
       api-during-upgrade the API gone after upgrade.yml's drain (a slurm.conf change; the holders released first,
                          as a drain upgrade refuses while jobs run; three held jobs queued); then upgrade.yml again
  3. `sbatch` as alice over SSH, once a second, until one is accepted: "sbatch again after" (from t0)
  4. every pod Ready and slurmctld answering: "pods ready after" (from t0)
  5. the two running jobs still RUNNING with their ids, the pending ones still PENDING (jobs are followed by
     name: a slurmctld that lost jobs hands their ids out again)
  6. site.yml: its rc and `changed` (a converge after the fault must find nothing to change)
  7. the jobs released: "jobs lost" counts the jobs of the round (running, pending, the accepted probe) that do
     not end with exactly one record in sacct, COMPLETED, under the id sbatch gave them (slurmctld keeps what
     it could not send slurmdbd, and sends it when slurmdbd is back)
Reported per fault as JSON (README, "Faults of the control plane").
"""

from __future__ import annotations

import argparse
import json
import os
import re
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
from tests.support.apiproxy import Proxy, kubeconfig_to  # noqa: E402
from tests.support.kube import LOCALKUBE, start_cluster  # noqa: E402
from tests.support.proc import collection_version, run, wait_for  # noqa: E402

NAME = "faults"
PORT = 30048
# the -unsaved round last: the jobs it loses leave their nodes to Slurm's judgement (see the results' nodes_after)
FAULTS = ("slurmctld-pod", "slurmctld-process", "slurmdbd-pod", "mariadb-pod", "kubelet", "api-during-site",
          "api-during-upgrade", "slurmctld-process-unsaved")
# where the API goes away: a line of the playbook's output (site.yml: slurmd's rollout step, after slurmctld's;
# upgrade.yml: the database backup, the first step after the drain)
CUT = {"api-during-site": "TASK [Apply slurmd]", "api-during-upgrade": "Back up the accounting database]"}
# deadlines for a loaded 2-core machine: a fault that is not over by then is reported as such, not waited for
RECOVERY_DEADLINE = 300


def host_pids(name):
    """Host PIDs of the processes called `name`."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() != name:
                continue
        except OSError:
            continue
        pids.append(int(entry.name))
    return pids


def inject(deployment, fault):
    kube, namespace = deployment.kube, deployment.namespace
    if fault.endswith("-pod"):
        pod = fault[:-len("-pod")] + "-0"
        kube.kubectl("delete", "pod", "-n", namespace, pod, "--wait=false")
    elif fault.startswith("slurmctld-process"):
        deployment.sigkill_slurmctld()
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


def sbatch_accepted(deployment, name):
    proc = deployment.ssh("sbatch --parsable -J %s -o /dev/null --wrap true" % name, timeout=60, check=False)
    return proc.stdout.strip() if proc.returncode == 0 and proc.stdout.strip().isdigit() else None


def ctld_answers(deployment):
    return deployment.ctld("scontrol", "ping", check=False, timeout=30).returncode == 0


def queue_by_name(deployment):
    """Job name -> (id, state) of the queue. Jobs are followed by name: a slurmctld that lost jobs hands their ids
    out again, to other jobs."""
    out = deployment.ctld("squeue", "-h", "-o", "%j|%i|%T", check=False).stdout
    return {name: (job, state) for name, job, state in (line.split("|") for line in out.splitlines() if line.count("|") == 2)}


def accounted_by_name(deployment, names):
    """Job name -> [(id, state), ...] in sacct (one record each when nothing was lost or handed out twice)."""
    out = deployment.ctld("sacct", "-X", "-n", "-P", "--name", ",".join(names), "-o", "JobName,JobID,State",
                          check=False).stdout
    records = {name: [] for name in names}
    for line in out.splitlines():
        name, job, state = line.split("|")
        records.setdefault(name, []).append((job, state))
    return records


def lost_jobs(deployment, jobs):
    """Waits (within 3 min) until every job of the round (name -> id sbatch gave) has exactly one record in sacct,
    COMPLETED, under its id; name -> [id, its records] of those that do not."""
    def records():
        return accounted_by_name(deployment, list(jobs))

    def lost(found):
        return {name: [jobs[name], found[name]] for name in sorted(jobs) if found[name] != [(jobs[name], "COMPLETED")]}
    try:
        wait_for(lambda: not lost(records()), 180, "every job of the round COMPLETED in sacct")
    except AssertionError:
        pass
    return lost(records())


def one_fault(deployment, fault):
    release = "/home/alice/faults-release-%s" % fault
    hold = "while [ ! -e %s ]; do sleep 0.5; done" % release
    jobs = {}    # name -> id, as sbatch acknowledged it
    for node in ("slurmd-0", "slurmd-1"):
        name = "%s-running-%s" % (fault, node)
        jobs[name] = deployment.ssh("sbatch --parsable --exclusive -w %s -J %s -o /dev/null --wrap '%s'"
                                    % (node, name, hold)).stdout.strip()
    running = list(jobs)
    wait_for(lambda: all(deployment.job_state(jobs[name]) == "RUNNING" for name in running), 60, "both holding jobs running")
    pending = ["%s-pending-%d" % (fault, n) for n in range(3)]
    for name in pending:
        jobs[name] = deployment.ssh("sbatch --parsable -J %s -o /dev/null --wrap true" % name).stdout.strip()
    acknowledged = time.time()
    saved = None
    if not fault.endswith("-unsaved"):
        wait_for(lambda: all(deployment.job_state(jobs[name]) == "PENDING" for name in pending), 30, "three jobs pending")
        wait_for(lambda: deployment.job_state_saved_since(acknowledged), 60, "slurmctld's job_state saved")
        saved = time.time() - acknowledged

    t0 = time.monotonic()
    restarter = inject(deployment, fault)
    probe, sbatch_again = "%s-probe" % fault, None
    while time.monotonic() - t0 < RECOVERY_DEADLINE:
        accepted = sbatch_accepted(deployment, probe)
        if accepted:
            sbatch_again = time.monotonic() - t0
            jobs[probe] = accepted
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
    queue = queue_by_name(deployment)
    # what the entrypoint and slurmctld said at the start after the fault
    logged = deployment.kube.kubectl("logs", "-n", deployment.namespace, "slurmctld-0", "-c", "slurmctld", check=False)
    slurmctld_log = [line for line in logged.stdout.splitlines()
                     if "slurm-k8s" in line or "error" in line or "fatal" in line or "Recovered" in line][-20:]
    nodes = deployment.nodes()
    site, changed, seconds = deployment.site(check=False)
    deployment.ssh("touch %s" % release)
    lost = lost_jobs(deployment, jobs)
    return {
        "fault": fault,
        "sbatch_again_s": round(sbatch_again, 1) if sbatch_again is not None else None,
        "pods_ready_s": round(ready, 1) if ready is not None else None,
        "running_kept": all(queue.get(name) == (jobs[name], "RUNNING") for name in running),
        "pending_kept": all(queue.get(name) == (jobs[name], "PENDING") for name in pending),
        "jobs_lost": len(lost), "lost": lost,
        # a lost job's id that slurmctld gave to another job of the round
        "ids_handed_out_again": sorted(jobs[name] for name in lost
                                       if any(jobs[other] == jobs[name] for other in jobs if other != name)),
        "nodes_after": nodes,
        "site_rc": site.returncode, "site_changed": changed, "site_s": round(seconds, 1),
        "site_message": None if site.returncode == 0 else site.stdout[-600:],
        "state_saved_after_s": round(saved, 1) if saved is not None else None,
        "slurmctld_log": slurmctld_log if fault.startswith("slurmctld") else None,
        "load_average": round(os.getloadavg()[0], 2),
    }


def api_fault(deployment, fault):
    """The Kubernetes API gone (every connection of the playbook cut, tests/support/apiproxy.py) in the middle of
    site.yml (with a job holding each worker and three pending) or of upgrade.yml (drain mode, a slurm.conf change:
    the holders released first, as a drain upgrade refuses while jobs run; three held jobs stay queued), at the
    step CUT names; then the API back and the same playbook again."""
    release = "/home/alice/faults-release-%s" % fault
    hold = "while [ ! -e %s ]; do sleep 0.5; done" % release
    jobs, running = {}, []
    if fault == "api-during-site":
        for node in ("slurmd-0", "slurmd-1"):
            name = "%s-running-%s" % (fault, node)
            jobs[name] = deployment.ssh("sbatch --parsable --exclusive -w %s -J %s -o /dev/null --wrap '%s'"
                                        % (node, name, hold)).stdout.strip()
            running.append(name)
        wait_for(lambda: all(deployment.job_state(jobs[name]) == "RUNNING" for name in running), 60, "both holding jobs running")
    pending = ["%s-pending-%d" % (fault, n) for n in range(3)]
    for name in pending:
        jobs[name] = deployment.ssh("sbatch --parsable %s -J %s -o /dev/null --wrap true"
                                    % ("--hold" if fault == "api-during-upgrade" else "", name)).stdout.strip()
    wait_for(lambda: all(deployment.job_state(jobs[name]) == "PENDING" for name in pending), 30, "three jobs pending")
    playbook, extra = ("site", ()) if fault == "api-during-site" else ("upgrade", ("-e", "upgrade_mode=drain"))
    if fault == "api-during-upgrade":
        deployment.save(config_slurm_conf=dict(deployment.variables.get("config_slurm_conf", {}), MaxJobCount=23456))
    kubeconfig = deployment.variables["cluster_kubeconfig"]
    proxy = Proxy()
    relayed = kubeconfig_to(deployment.kube, deployment.workdir / "proxy.kubeconfig", server="https://127.0.0.1:%d" % proxy.port)
    deployment.save(cluster_kubeconfig=relayed)
    try:
        cut, _changed, cut_s = deployment.playbook(playbook, *extra, check=False, when_output=(CUT[fault], proxy.stop))
    finally:
        proxy.stop()
        deployment.save(cluster_kubeconfig=kubeconfig)
    nodes_after_cut = deployment.nodes()
    queue = queue_by_name(deployment)
    again, changed, again_s = deployment.playbook(playbook, *extra, check=False)
    nodes_after = deployment.nodes()
    if fault == "api-during-upgrade":
        deployment.ctld("scontrol", "release", ",".join(jobs[name] for name in pending))
    else:
        deployment.ssh("touch %s" % release)
    lost = lost_jobs(deployment, jobs)
    message = re.search(r"(UPGRADE STOPPED[^\n]*|[a-z_]+: '[^'\n]*' failed:[^\n]*)", cut.stdout)
    return {
        "fault": fault, "cut_at": CUT[fault],
        "cut_rc": cut.returncode, "cut_s": round(cut_s, 1), "cut_message": message.group(1)[:900] if message else cut.stdout[-900:],
        "nodes_after_cut": nodes_after_cut,
        "running_kept": all(queue.get(name) == (jobs[name], "RUNNING") for name in running),
        "pending_kept": all(queue.get(name) == (jobs[name], "PENDING") for name in pending),
        "again_rc": again.returncode, "again_changed": changed, "again_s": round(again_s, 1),
        "nodes_after": nodes_after,
        "jobs_lost": len(lost), "lost": lost,
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
            result = (api_fault if fault.startswith("api-") else one_fault)(deployment, fault)
            print(json.dumps(result), flush=True)
            results.append(result)
            try:
                wait_for(lambda: deployment.pods_ready() and ctld_answers(deployment), RECOVERY_DEADLINE, "pods ready")
                deployment.wait_nodes({"slurmd-0": "idle", "slurmd-1": "idle"}, 120)
            except AssertionError as error:
                # what the fault left (a node Slurm drained, and its reason): reported, and no round after it
                result["left_behind"] = {"error": str(error)[:300], "nodes": deployment.nodes()}
                print(json.dumps({"fault": fault, "left_behind": result["left_behind"]}), flush=True)
                break
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
