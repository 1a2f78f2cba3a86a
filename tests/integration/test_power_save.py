# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Power saving as site.yml configures it, with a REAL slurmctld (host Slurm 22.05) driving slurm-k8s-power.

site.yml renders the cluster (directory backend) with one burst group; everything slurmctld reads comes
from that render, written where the pod would mount it, as the kubelet would: slurm.conf from ConfigMap
slurm-config (made by the config role's template with the powersave role's facts), and the program's
configuration, pod template and wrappers from ConfigMap slurm-power with the modes of the slurmctld
pod's volume. Only SlurmctldHost is replaced (the pod's name and Service); ports, paths, the API server
and 22.05's own needs are role variables (site_vars below).

The fake Kubernetes API (tests/unit/powersave/fakekube.py) plays the kubelet: a created pod starts a
real ``slurmd -D -b -N <node>``, a deleted pod stops it; in "stuck" mode pods stay Pending forever.
slurmctld runs the program as in the slurmctld pod: as SlurmUser, through the rendered wrappers, with
Slurm's own (almost empty) environment.

The always-on workers: static n1, n2 and a dynamic ``slurmd -Z`` node started with the rendered slurmd
pod's SLURMD_NODE_CONF; all carry Feature k8s, so they form NodeSet k8s, the default partition.
22.05 differs from the 24.11 the image runs: ``cloud_reg_addrs`` (defunct in 24.11) and no
``SuspendExcStates`` (its dynamic nodes are kept out of power saving by having no SuspendTime).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "unit" / "powersave"))
from fakekube import FakeKube  # noqa: E402
from slurmhost import ModuleRunner, SlurmHostCluster, ensure_munged  # noqa: E402  (puts the repository on sys.path)
from tests.support.proc import wait_for  # noqa: E402
from tests.support.power import PROGRAM  # noqa: E402
SITE = ROOT / "playbooks" / "site.yml"
PORT_BASE = 17800
BURST = ["slurmd-burst-0", "slurmd-burst-1", "slurmd-burst-2"]
ALWAYS_ON = ["n1", "n2"]
DYNAMIC = "slurmd-0"
NAMESPACE = "slurm"
REQUIRED = ("slurmctld", "slurmd", "scontrol", "squeue", "sbatch", "sinfo", "munged", "ansible-playbook")
TIMINGS = {"SuspendTime": 5, "SuspendTimeout": 5, "ResumeTimeout": 20}


def _missing_tools():
    return [tool for tool in REQUIRED if not shutil.which(tool) and not Path("/usr/sbin", tool).exists()]


def site_vars(workdir: Path, fake: FakeKube) -> dict:
    """site.yml variables: one burst group, and this host in place of the pod, all as role variables."""
    burst_port = PORT_BASE + 190
    first = PORT_BASE + 201   # SlurmHostCluster: node nI listens on port_base + 200 + I
    return {
        "cluster_render_dir": str(workdir / "render"),
        "storage_class": "standard",
        "powersave_groups": [{
            "name": "burst", "count": len(BURST), "cpus": 2, "memory_mib": 1024, "features": ["burst"],
            "suspend_time": TIMINGS["SuspendTime"], "suspend_timeout": TIMINGS["SuspendTimeout"],
            "suspend_grace_period": 3,
            # the role's minimum is 30 s (a production guard); the test's 20 s goes in as plain keys
            "resume_timeout": 30, "partition_conf": {"ResumeTimeout": TIMINGS["ResumeTimeout"]},
            # several slurmd on one host: a port each (in Kubernetes every pod has its own address)
            "node_conf": {"Port": "[%d-%d]" % (burst_port, burst_port + len(BURST) - 1)},
        }],
        "powersave_slurm_conf_extra": {"ResumeTimeout": TIMINGS["ResumeTimeout"]},
        # Slurm 22.05 does not know SuspendExcStates
        "powersave_suspend_exc_states": [],
        # where the slurmctld pod would have the program, its ConfigMap, token and log
        "powersave_program": str(workdir / "bin" / PROGRAM.name),
        "powersave_mount_path": str(workdir / "power"),
        "powersave_token_path": str(workdir / "power-token"),
        "powersave_log_file": str(workdir / "log" / "slurm-k8s-power.log"),
        "powersave_scontrol": shutil.which("scontrol") or "/usr/bin/scontrol",
        # where SlurmHostCluster writes slurm.conf (in the pod: where the entrypoint links it)
        "powersave_slurm_conf_path": str(workdir / "etc" / "slurm.conf"),
        "powersave_api_server": fake.url,
        "powersave_terminating_wait": 10,
        # two static always-on workers with the Feature of the dynamic ones (NodeSet k8s)
        "config_nodes": [{"NodeName": "n[1-2]", "NodeAddr": "127.0.0.1", "Port": "[%d-%d]" % (first, first + 1),
                          "CPUs": 2, "RealMemory": 1000, "Feature": "k8s", "State": "UNKNOWN"}],
        "config_slurm_conf": {
            "SlurmctldPort": PORT_BASE + 17,
            "SlurmdPort": PORT_BASE + 195,      # the dynamic node's
            "StateSaveLocation": str(workdir / "state"),
            "SlurmdSpoolDir": str(workdir / "spool" / "%n"),
            "SlurmctldPidFile": str(workdir / "run" / "slurmctld.pid"),
            "SlurmdPidFile": str(workdir / "run" / "slurmd-%n.pid"),
            "SlurmctldLogFile": str(workdir / "log" / "slurmctld.log"),
            "SlurmdLogFile": str(workdir / "log" / "slurmd-%n.log"),
            # no slurmdbd in this test
            "AccountingStorageType": "accounting_storage/none",
            "AccountingStorageHost": None,
            "AccountingStoragePort": None,
            # 22.05 takes a CLOUD node's address from its registration only with cloud_reg_addrs
            "SlurmctldParameters": "cloud_reg_addrs,power_save_interval=1",
            "SchedulerParameters": "sched_interval=1",
            "DebugFlags": "Power",
            # 22.05 leaves powered-down CLOUD nodes out of node listings without this
            "PrivateData": "cloud",
            # a requeued job may start again after cred_expire (default 120 s): keep the test short
            "AuthInfo": "cred_expire=10",
        },
    }


def render_site(workdir: Path, fake: FakeKube) -> dict:
    """Run site.yml in render mode; return {kind/name: manifest}."""
    variables = site_vars(workdir, fake)
    vars_file = workdir / "site-vars.json"
    vars_file.write_text(json.dumps(variables))
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="0")
    started = time.monotonic()
    proc = subprocess.run(["ansible-playbook", str(SITE), "-e", "@%s" % vars_file], capture_output=True, text=True,
                          env=env, cwd=str(ROOT), timeout=900, check=False)
    assert proc.returncode == 0, "site.yml failed:\n%s" % (proc.stdout + proc.stderr)[-6000:]
    print("\nsite.yml rendered the cluster in %.1f s" % (time.monotonic() - started))
    docs = {}
    for path in sorted((workdir / "render" / NAMESPACE).glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        docs["%s/%s" % (doc["kind"], doc["metadata"]["name"])] = doc
    return docs


def mount_like_kubelet(docs: dict, workdir: Path, fake: FakeKube) -> dict:
    """Write what the slurmctld pod mounts from the render: slurm.conf, ConfigMap slurm-power (with
    the volume's item modes) and the projected token. Returns the rendered files by name."""
    ctld = docs["StatefulSet/slurmctld"]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in ctld["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in ctld["containers"][0]["volumeMounts"]}
    power = docs["ConfigMap/%s" % volumes["power"]["configMap"]["name"]]["data"]
    target = Path(mounts["power"])
    target.mkdir(parents=True, exist_ok=True)
    for item in volumes["power"]["configMap"]["items"]:
        path = target / item["path"]
        path.write_text(power[item["key"]])
        path.chmod(item["mode"])
    token_dir = Path(mounts["power-token"])
    token_dir.mkdir(parents=True, exist_ok=True)
    (token_dir / "token").write_text(fake.token)
    (token_dir / "token").chmod(0o644)
    for directory in (workdir, target, token_dir):
        directory.chmod(0o755)
    return power


class PowerSaveCluster(SlurmHostCluster):
    """slurmctld with the rendered slurm.conf; always-on n1, n2 (static) and slurmd-0 (dynamic)."""

    def __init__(self, workdir: Path, slurm_conf: str, dynamic_conf: str) -> None:
        super().__init__(workdir, nodes=len(ALWAYS_ON), port_base=PORT_BASE, accounting=False)
        # the only change: SlurmctldHost names the pod and its Service, here this host
        self.slurm_conf = re.sub(r"^SlurmctldHost=.*$", "SlurmctldHost=%s(127.0.0.1)" % socket.gethostname().split(".")[0],
                                 slurm_conf, count=1, flags=re.M)
        self.dynamic_conf = dynamic_conf
        self.dynamic_proc: subprocess.Popen | None = None
        self.rendered: dict = {}       # the site.yml render, {kind/name: manifest}
        self.power_files: dict = {}    # ConfigMap slurm-power's data

    def _write_config(self) -> None:
        super()._write_config()   # directories and their owners
        self.conf.write_text(self.slurm_conf)

    def start(self, timeout: float = 60.0) -> "PowerSaveCluster":
        super().start(timeout)
        # the always-on slurmd pod's command (entrypoint: slurmd -D -b -Z -N <pod> --conf $SLURMD_NODE_CONF)
        (self.workdir / "spool" / DYNAMIC).mkdir(parents=True, exist_ok=True)
        with open(self.log_dir / ("slurmd-%s.out" % DYNAMIC), "ab") as out:
            self.dynamic_proc = subprocess.Popen(
                ["slurmd", "-D", "-b", "-Z", "-N", DYNAMIC, "--conf", self.dynamic_conf, "-f", str(self.conf)],
                stdout=out, stderr=out, env=self.env, start_new_session=True)
        self.wait_nodes_idle(self.node_names + [DYNAMIC], timeout)
        return self

    def stop(self) -> None:
        if self.dynamic_proc is not None and self.dynamic_proc.poll() is None:
            self.dynamic_proc.send_signal(signal.SIGTERM)
            try:
                self.dynamic_proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.dynamic_proc.kill()
                self.dynamic_proc.wait()
        super().stop()


class FakeKubelet:
    """Starts a real slurmd for each created pod (unless stuck), stops it when the pod is deleted."""

    def __init__(self, cluster: PowerSaveCluster, fake: FakeKube) -> None:
        self.cluster, self.fake = cluster, fake
        self.stuck = False
        self.procs: dict[str, subprocess.Popen] = {}
        self.lock = threading.Lock()
        fake.on_create = self.on_create
        fake.on_delete = self.on_delete

    def on_create(self, pod: dict) -> None:
        node = pod["metadata"]["name"]
        if self.stuck:
            return  # stays Pending: no Kubernetes node for it (e.g. the autoscaler cannot scale up)
        (self.cluster.workdir / "spool" / node).mkdir(parents=True, exist_ok=True)
        with open(self.cluster.log_dir / ("slurmd-%s.out" % node), "ab") as out:
            proc = subprocess.Popen(["slurmd", "-D", "-b", "-N", node, "-f", str(self.cluster.conf)],
                                    stdout=out, stderr=out, env=self.cluster.env, start_new_session=True)
        with self.lock:
            self.procs[node] = proc
        self.fake.set_phase(node, "Running")

    def on_delete(self, pod: dict, grace: int) -> float:
        node = pod["metadata"]["name"]
        with self.lock:
            proc = self.procs.pop(node, None)
        if proc is not None:
            threading.Thread(target=self._stop, args=(proc, grace), daemon=True).start()
        return 1.0  # Terminating for a second, like a pod whose container exits quickly

    @staticmethod
    def _stop(proc: subprocess.Popen, grace: int) -> None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=max(grace, 1))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def stop_all(self) -> None:
        with self.lock:
            procs, self.procs = list(self.procs.values()), {}
        for proc in procs:
            self._stop(proc, 5)


@pytest.fixture(scope="module")
def power():
    missing = _missing_tools()
    if missing or os.geteuid() != 0:
        message = "real Slurm daemons need root and %s" % (", ".join(missing) or "nothing more")
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    # Not under pytest's basetemp (0700): slurmctld runs as SlurmUser, which must reach its state dir.
    top = Path(os.environ.get("SLURMHOST_DIR") or tempfile.mkdtemp(prefix="hpc-powersave-"))
    top.chmod(0o755)
    workdir = top / "cluster"
    workdir.mkdir(parents=True, exist_ok=True)
    # a copy: SlurmUser must reach the program, and the checkout may sit under a 0700 directory
    # (slurmctld then silently disables power saving)
    (workdir / "bin").mkdir(mode=0o755, exist_ok=True)
    shutil.copyfile(PROGRAM, workdir / "bin" / PROGRAM.name)
    (workdir / "bin" / PROGRAM.name).chmod(0o644)
    fake = FakeKube(namespace=NAMESPACE).start()
    fake.add_statefulset("slurmctld")
    cluster = kubelet = None
    try:
        docs = render_site(workdir, fake)
        files = mount_like_kubelet(docs, workdir, fake)
        slurmd_env = {e["name"]: e.get("value") for e in
                      docs["StatefulSet/slurmd"]["spec"]["template"]["spec"]["containers"][0]["env"]}
        cluster = PowerSaveCluster(workdir, docs["ConfigMap/slurm-config"]["data"]["slurm.conf"],
                                   slurmd_env["SLURMD_NODE_CONF"])
        cluster.rendered = docs
        cluster.power_files = files
        kubelet = FakeKubelet(cluster, fake)
        ensure_munged()
        cluster.start()
        yield cluster, fake, kubelet
    finally:
        if kubelet is not None:
            kubelet.stop_all()
        if cluster is not None:
            cluster.stop()
        fake.stop()
        if not os.environ.get("SLURMHOST_DIR"):
            shutil.rmtree(top, ignore_errors=True)


# ------------------------------------------------------------------------------------------ helpers
class Watcher:
    """Samples `scontrol show node` in the background: the states each node went through.

    scontrol, not sinfo: 22.05's sinfo leaves out powered-down CLOUD nodes in some states."""

    def __init__(self, cluster: PowerSaveCluster) -> None:
        self.cluster = cluster
        self.seen: dict[str, list[tuple[float, str]]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "Watcher":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            out = self.cluster.run(["scontrol", "-o", "show", "node"], check=False).stdout
            now = time.monotonic()
            for line in out.splitlines():
                fields = dict(re.findall(r"(\w+)=(\S*)", line))
                node, state = fields.get("NodeName", ""), fields.get("State", "")
                states = self.seen.setdefault(node, [])
                if not states or states[-1][1] != state:
                    states.append((now, state))
            self._stop.wait(0.2)

    def states(self, node: str) -> list[str]:
        return [state for _when, state in self.seen.get(node, [])]


def called_for(cluster: PowerSaveCluster, command: str) -> set[str]:
    """Every node slurmctld ran slurm-k8s-power `command` (resume, suspend, ...) for, from the program's
    log of each call ("<command> INFO called for <hostlist>")."""
    nodes: set[str] = set()
    for hostlist in re.findall(r" %s INFO called for (\S+)" % re.escape(command), power_log(cluster)):
        nodes.update(cluster.run(["scontrol", "show", "hostnames", hostlist]).stdout.split())
    return nodes


def job_info(cluster: PowerSaveCluster, job_id: str) -> dict[str, str]:
    out = cluster.run(["scontrol", "-o", "show", "job", job_id], check=False).stdout
    return dict(re.findall(r"(\w+)=(\S*)", out))


def node_state(cluster: PowerSaveCluster, node: str) -> str:
    return cluster.run(["sinfo", "-h", "-n", node, "-o", "%t"], check=False).stdout.strip()


def submit(cluster: PowerSaveCluster, seconds: int) -> str:
    out = cluster.run(["sbatch", "--parsable", "-p", "burst", "-N1", "-o", "/dev/null",
                       "--wrap", "sleep %d" % seconds]).stdout
    return out.strip().split(";")[0]


def partition_nodes(cluster: PowerSaveCluster, partition: str) -> list[str]:
    out = cluster.run(["sinfo", "-h", "-N", "-p", partition, "-o", "%N"], check=False).stdout
    return sorted(set(out.split()))


def power_log(cluster: PowerSaveCluster) -> str:
    path = cluster.workdir / "log" / "slurm-k8s-power.log"
    return path.read_text() if path.exists() else ""


def report(name: str, value: float) -> None:
    print("\nMEASURE %s: %.1f s" % (name, value))


# -------------------------------------------------------------------------------------------- tests
def test_slurm_conf_is_the_config_roles_with_the_powersave_facts(power):
    cluster = power[0]
    text = cluster.conf.read_text()
    rendered = cluster.rendered["ConfigMap/slurm-config"]["data"]["slurm.conf"]
    # everything but SlurmctldHost as rendered
    assert [line for line in text.splitlines() if not line.startswith("SlurmctldHost=")] == \
        [line for line in rendered.splitlines() if not line.startswith("SlurmctldHost=")]
    mount = site_vars(cluster.workdir, power[1])["powersave_mount_path"]
    for line in ("ResumeProgram=%s/resume" % mount, "SuspendProgram=%s/suspend" % mount,
                 "ResumeFailProgram=%s/resume-fail" % mount, "ResumeTimeout=20", "SuspendTimeout=5",
                 "NodeSet=k8s Feature=k8s", "PartitionName=compute Nodes=k8s Default=YES MaxTime=INFINITE State=UP",
                 "NodeName=slurmd-burst-[0-2] State=CLOUD CPUs=2 RealMemory=921 Feature=burst Port=[17990-17992]",
                 "PartitionName=burst Nodes=slurmd-burst-[0-2] State=UP MaxTime=INFINITE SuspendTime=5 "
                 "SuspendTimeout=5 ResumeTimeout=20",
                 "MaxNodeCount=%d" % (1024 + len(BURST))):
        assert line in text.splitlines(), line
    assert "SuspendExcStates" not in text
    # the wrappers slurmctld runs are the rendered ones, root-owned and not writable (else Slurm
    # silently disables power saving)
    for command in ("resume", "suspend", "resume-fail", "prolog"):
        wrapper = Path(mount) / command
        assert wrapper.read_text() == cluster.power_files[command]
        assert wrapper.stat().st_mode & 0o777 == 0o555
    assert "power_save module disabled" not in (cluster.log_dir / "slurmctld.log").read_text()


def test_burst_nodes_start_powered_down(power):
    cluster, fake = power[0], power[1]
    wait_for(lambda: all(node_state(cluster, n) == "idle~" for n in BURST), 120, "burst nodes idle~")
    assert all(node_state(cluster, n) == "idle" for n in ALWAYS_ON + [DYNAMIC])
    # NodeSet k8s: the default partition has the always-on workers, static and dynamic, and no burst node
    assert partition_nodes(cluster, "compute") == sorted(ALWAYS_ON + [DYNAMIC])
    assert partition_nodes(cluster, "burst") == BURST
    assert fake.pods == {}


def test_default_partition_never_powers_up_a_burst_node(power):
    cluster, fake = power[0], power[1]
    out = cluster.run(["sbatch", "--parsable", "-N3", "-o", "/dev/null", "--wrap", "true"]).stdout
    job = out.strip().split(";")[0]
    wait_for(lambda: job_info(cluster, job).get("JobState") == "COMPLETED", 120, "job %s COMPLETED" % job)
    info = job_info(cluster, job)
    assert info["Partition"] == "compute"
    assert sorted(cluster.run(["scontrol", "show", "hostnames", info["NodeList"]]).stdout.split()) == \
        sorted(ALWAYS_ON + [DYNAMIC])
    assert fake.calls("POST") == []


def slurm_epoch(stamp: str) -> float:
    """A time as Slurm prints it (local time, seconds) in seconds since the epoch."""
    return time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S"))


def test_job_powers_a_node_up_runs_and_the_node_powers_down(power):
    cluster, fake, kubelet = power
    kubelet.stuck = False
    with Watcher(cluster) as watcher:
        job = submit(cluster, 3)
        # final states only, with deadlines for a loaded 2-core machine; the times come from the records below
        wait_for(lambda: job_info(cluster, job).get("JobState") == "COMPLETED", 180, "job %s COMPLETED" % job,
                 interval=0.5)
        node = job_info(cluster, job)["NodeList"]
        assert node in BURST, job_info(cluster, job)
        wait_for(lambda: node not in fake.pods, 120, "pod %s deleted" % node, interval=0.2)
        wait_for(lambda: node_state(cluster, node) == "idle~", 120, "%s idle~" % node)
    info = job_info(cluster, job)
    submitted, started = slurm_epoch(info["SubmitTime"]), slurm_epoch(info["StartTime"])
    ended = slurm_epoch(info["EndTime"])
    created = [r for r in fake.calls("POST") if r.body["metadata"]["name"] == node][-1].time
    deleted = [r for r in fake.calls("DELETE") if r.path.endswith("/" + node)][-1].time
    # (the fake API's request times are monotonic: their distance is what counts)
    report("sbatch -> job started (Slurm's SubmitTime -> StartTime, reset at the launch)", started - submitted)
    report("pod POSTed by ResumeProgram -> pod DELETEd by SuspendProgram", deleted - created)
    report("job ended -> node idle~ (Slurm's EndTime -> now)", time.time() - ended)
    # the record of slurmctld running ResumeProgram for the node and, once idle, SuspendProgram (each
    # call is logged with the hostlist Slurm passed), and the final state; sampled states would only
    # show what the poller happened to catch
    assert node in called_for(cluster, "resume")
    assert node in called_for(cluster, "suspend")
    assert node_state(cluster, node) == "idle~"
    # PrologSlurmctld waited for the node, and slurmctld launched the job when it ended (prolog_running_decr),
    # not at its periodic job check (job_time_limit, every 30 s)
    assert re.search(r"prolog INFO job %s: every burst node registered after" % job, power_log(cluster)), \
        power_log(cluster)[-3000:]
    ctld_log = (cluster.log_dir / "slurmctld.log").read_text()
    assert re.search(r"prolog_running_decr: Configuration for JobId=%s is complete" % job, ctld_log), ctld_log[-4000:]
    assert not re.search(r"job_time_limit: Configuration for JobId=%s complete" % job, ctld_log)
    # the pod is the rendered template, named after the node, owned by the slurmctld StatefulSet
    post = [r for r in fake.calls("POST") if r.body["metadata"]["name"] == node][-1]
    template = json.loads(cluster.power_files["pod-burst.json"])
    assert post.body["spec"] == template["spec"]
    assert post.body["spec"]["serviceAccountName"] == "slurmd-burst"
    assert post.body["metadata"]["labels"] == dict(template["metadata"]["labels"], **{
        "hpc.slurm-k8s/slurm-node": node, "hpc.slurm-k8s/burst-group": "burst"})
    assert post.body["metadata"]["annotations"]["hpc.slurm-k8s/resume-jobs"] == job
    assert post.body["metadata"]["ownerReferences"][0]["name"] == "slurmctld"
    delete = [r for r in fake.calls("DELETE") if r.path.endswith("/" + node)][-1]
    assert delete.body["gracePeriodSeconds"] == 3
    # the always-on nodes were never powered down
    for always_on in ALWAYS_ON + [DYNAMIC]:
        assert not any("POWER" in s for s in watcher.states(always_on)), watcher.states(always_on)


def test_a_busy_burst_node_powered_down_by_slurm_node_runs_its_job_to_the_end_first(power):
    """slurm_node state=powered_down (what a rollout does to a burst pod made from an old template) on a
    burst node running a job: no new job starts there, the job runs to its end, then SuspendProgram
    deletes the pod and Slurm ends the drain itself; a second call changes nothing."""
    cluster, fake, kubelet = power
    kubelet.stuck = False
    release = cluster.workdir / "release-burst-job"
    out = cluster.run(["sbatch", "--parsable", "-p", "burst", "-N1", "-o", "/dev/null", "--wrap",
                       "while [ ! -e %s ]; do sleep 0.2; done" % release]).stdout
    job = out.strip().split(";")[0]
    wait_for(lambda: job_info(cluster, job).get("JobState") == "RUNNING", 180, "job %s running" % job)
    node = job_info(cluster, job)["NodeList"]
    run_module = ModuleRunner(cluster)
    args = {"nodes": [node], "state": "powered_down", "tag": "rollout", "reason": "pod template changed"}
    result = run_module("slurm_node", args)
    assert not result["failed"] and result["changed"] and result["changed_nodes"] == [node], result
    print("\n%s after POWER_DOWN_ASAP: %s" % (node, result["nodes"][node]["after"]))
    assert result["nodes"][node]["after"]["reason"] == "hpc.slurm_k8s:rollout pod template changed", result
    again = run_module("slurm_node", args)
    assert not again["failed"] and not again["changed"] and again["unchanged_nodes"] == [node], again
    # drained: a second burst job does not start there
    other = submit(cluster, 1)
    time.sleep(2)
    assert job_info(cluster, other).get("NodeList") != node and node in fake.pods
    assert job_info(cluster, job).get("JobState") == "RUNNING"
    deletes = len([r for r in fake.calls("DELETE") if r.path.endswith("/" + node)])
    release.touch()
    wait_for(lambda: job_info(cluster, job).get("JobState") == "COMPLETED", 120, "job %s COMPLETED" % job)
    # then SuspendProgram deleted the pod (the fake API's record of the request)
    wait_for(lambda: len([r for r in fake.calls("DELETE") if r.path.endswith("/" + node)]) > deletes, 120,
             "pod %s deleted" % node)
    # the second job ran (perhaps on this node, powered up again: a new pod from the current template)
    wait_for(lambda: job_info(cluster, other).get("JobState") == "COMPLETED", 120, "job %s COMPLETED" % other)
    # Slurm ended the drain of the power-down itself
    state = cluster.run(["scontrol", "-o", "show", "node", node]).stdout
    assert "DRAIN" not in re.search(r" State=(\S+)", state).group(1), state


def test_stuck_pod_fails_resume_then_job_is_requeued_and_completes(power):
    cluster, fake, kubelet = power
    wait_for(lambda: all(node_state(cluster, n) == "idle~" for n in BURST), 120, "burst nodes idle~")
    kubelet.stuck = True
    with Watcher(cluster) as watcher:
        job = submit(cluster, 2)
        node = wait_for(lambda: job_info(cluster, job).get("NodeList") if job_info(cluster, job).get("NodeList")
                        not in (None, "", "(null)") else None, 60, "job %s to get a node" % job)
        wait_for(lambda: node in fake.pods, 60, "pod %s created" % node)
        assert fake.pods[node]["status"]["phase"] == "Pending"
        # ResumeTimeout: slurmctld marks the node DOWN+POWERED_DOWN, requeues the job and runs
        # ResumeFailProgram, which deletes the pod and returns the node to idle~
        wait_for(lambda: "resume-fail" in power_log(cluster) and node not in fake.pods,
                 TIMINGS["ResumeTimeout"] + 20, "resume-fail for %s" % node)
        kubelet.stuck = False   # the API behaves again
        wait_for(lambda: int(job_info(cluster, job).get("Restarts", "0")) >= 1, 120, "job %s requeued" % job)
        wait_for(lambda: job_info(cluster, job).get("JobState") == "COMPLETED", 180, "job %s COMPLETED" % job,
                 interval=0.5)
    # What Slurm recorded, not states a poller happened to catch (under load it can miss down~):
    # slurmctld's log of the ResumeTimeout, the job's requeue count and its final state above.
    ctld_log = (cluster.log_dir / "slurmctld.log").read_text()
    assert re.search(r"node %s not resumed by ResumeTimeout" % re.escape(node), ctld_log), ctld_log[-4000:]
    assert re.search(r"requeue job JobId=%s due to failure of node %s" % (job, re.escape(node)), ctld_log), \
        ctld_log[-4000:]
    assert int(job_info(cluster, job).get("Restarts", "0")) >= 1
    log = power_log(cluster)
    assert re.search(r"resume-fail INFO %s: pod deleted" % re.escape(node), log), log
    assert re.search(r"resume-fail INFO .*%s.*state=resume" % re.escape(node), log), log
    # a safety property: a sample can only miss a state, never invent one, so this cannot flake
    for always_on in ALWAYS_ON + [DYNAMIC]:
        assert not any("POWER" in s for s in watcher.states(always_on)), watcher.states(always_on)
    print("\nstates of %s seen by sampling: %s" % (node, " -> ".join(watcher.states(node))))
