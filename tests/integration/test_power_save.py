# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Power saving with a REAL slurmctld (host Slurm 22.05) driving images/slurm/slurm-k8s-power.

The fake Kubernetes API (tests/unit/powersave/fakekube.py) plays the kubelet: a created pod starts a
real ``slurmd -D -b -N <node>`` with the test's slurm.conf, a deleted pod stops it; in "stuck" mode
pods stay Pending forever. slurmctld runs the program exactly as in the slurmctld pod: as SlurmUser,
through two-line wrappers, with Slurm's own (almost empty) environment.

22.05 differences from the role's 24.11 lines: ``cloud_reg_addrs`` (defunct in 24.11) and no
``SuspendExcStates``: the always-on nodes n1, n2 are kept out by SuspendExcNodes and by SuspendTime
being set on the burst partition only.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "unit" / "powersave"))
from fakekube import FakeKube  # noqa: E402
from slurmhost import SLURM_USER, SlurmHostCluster, ensure_munged  # noqa: E402

PROGRAM = HERE.parents[1] / "images" / "slurm" / "slurm-k8s-power"
PORT_BASE = 17800
BURST = ["burst-0", "burst-1", "burst-2"]
NAMESPACE = "slurm"
REQUIRED = ("slurmctld", "slurmd", "scontrol", "squeue", "sbatch", "sinfo", "munged")
TIMINGS = {"SuspendTime": 5, "SuspendTimeout": 5, "ResumeTimeout": 20}


def _missing_tools():
    return [tool for tool in REQUIRED if not shutil.which(tool) and not Path("/usr/sbin", tool).exists()]


class PowerSaveCluster(SlurmHostCluster):
    """2 always-on nodes (partition debug) and 3 CLOUD nodes (partition burst) run by the fake API."""

    def __init__(self, workdir: Path) -> None:
        self.power_dir = Path(workdir).resolve() / "power"
        burst_port = PORT_BASE + 190
        wrappers = {name: self.power_dir / name for name in ("resume", "suspend", "resume-fail")}
        extra = "\n".join([
            "SlurmctldParameters=cloud_reg_addrs,power_save_interval=1",
            "ResumeProgram=%s" % wrappers["resume"],
            "SuspendProgram=%s" % wrappers["suspend"],
            "ResumeFailProgram=%s" % wrappers["resume-fail"],
            "ResumeRate=0",
            "SuspendRate=0",
            "ResumeTimeout=%d" % TIMINGS["ResumeTimeout"],
            "SuspendTimeout=%d" % TIMINGS["SuspendTimeout"],
            "SuspendExcNodes=n[1-2]",
            "DebugFlags=Power",
            # 22.05 leaves powered-down CLOUD nodes out of node listings without this
            "PrivateData=cloud",
            # a requeued job may start again after cred_expire (default 120 s): keep the test short
            "AuthInfo=cred_expire=10",
            "NodeName=burst-[0-2] State=CLOUD CPUs=2 RealMemory=1000 Feature=burst Port=[%d-%d]"
            % (burst_port, burst_port + 2),
            "PartitionName=burst Nodes=burst-[0-2] MaxTime=INFINITE State=UP SuspendTime=%d "
            "SuspendTimeout=%d ResumeTimeout=%d"
            % (TIMINGS["SuspendTime"], TIMINGS["SuspendTimeout"], TIMINGS["ResumeTimeout"]),
        ])
        super().__init__(workdir, nodes=2, port_base=PORT_BASE, accounting=False, extra_conf=extra)
        self.wrappers = wrappers

    def _write_config(self) -> None:
        super()._write_config()
        # the always-on partition must not take the burst nodes (Nodes=ALL would)
        text = self.conf.read_text().replace("PartitionName=debug Nodes=ALL", "PartitionName=debug Nodes=n[1-2]")
        self.conf.write_text(text)

    def stop(self) -> None:
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
    fake = FakeKube(namespace=NAMESPACE).start()
    fake.add_statefulset("slurmctld")
    cluster = PowerSaveCluster(workdir)
    kubelet = FakeKubelet(cluster, fake)
    _write_power_files(cluster, fake)
    ensure_munged()
    cluster.start()
    yield cluster, fake, kubelet
    kubelet.stop_all()
    cluster.stop()
    fake.stop()
    if not os.environ.get("SLURMHOST_DIR"):
        shutil.rmtree(top, ignore_errors=True)


def _write_power_files(cluster: PowerSaveCluster, fake: FakeKube) -> None:
    """Config, token, pod template and wrappers, as the powersave role renders them in the pod."""
    cluster.workdir.mkdir(parents=True, exist_ok=True)
    cluster.power_dir.mkdir(parents=True, exist_ok=True)
    (cluster.workdir / "log").mkdir(exist_ok=True)
    shutil.chown(cluster.workdir / "log", SLURM_USER, SLURM_USER)
    token = cluster.power_dir / "token"
    token.write_text(fake.token)
    token.chmod(0o644)
    template = cluster.power_dir / "pod-burst.json"
    template.write_text(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {"app": "burst"}},
                                    "spec": {"containers": [{"name": "slurmd", "env": [
                                        {"name": "SLURMD_DYNAMIC", "value": "false"}]}]}}))
    config = cluster.power_dir / "config.json"
    config.write_text(json.dumps({
        "api_server": fake.url, "namespace": NAMESPACE, "token_file": str(token), "ca_file": "",
        "scontrol": shutil.which("scontrol") or "/usr/bin/scontrol",
        "log_file": str(cluster.workdir / "log" / "slurm-k8s-power.log"),
        "owner_statefulset": "slurmctld", "terminating_wait": 10, "poll_interval": 0.5,
        "groups": [{"name": "burst", "prefix": "burst-", "count": 3, "pod_template": str(template),
                    "suspend_grace_period": 3}],
    }))
    for command, wrapper in cluster.wrappers.items():
        wrapper.write_text('#!/bin/sh\nexec %s %s "$@" --config %s\n' % (PROGRAM, command, config))
        wrapper.chmod(0o755)
    for path in (config, template):
        path.chmod(0o644)
    cluster.power_dir.chmod(0o755)


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


def wait_for(predicate, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("timed out after %.0f s waiting for %s" % (timeout, what))


def job_info(cluster: PowerSaveCluster, job_id: str) -> dict[str, str]:
    out = cluster.run(["scontrol", "-o", "show", "job", job_id], check=False).stdout
    return dict(re.findall(r"(\w+)=(\S*)", out))


def node_state(cluster: PowerSaveCluster, node: str) -> str:
    return cluster.run(["sinfo", "-h", "-n", node, "-o", "%t"], check=False).stdout.strip()


def submit(cluster: PowerSaveCluster, seconds: int) -> str:
    out = cluster.run(["sbatch", "--parsable", "-p", "burst", "-N1", "-o", "/dev/null",
                       "--wrap", "sleep %d" % seconds]).stdout
    return out.strip().split(";")[0]


def power_log(cluster: PowerSaveCluster) -> str:
    path = cluster.workdir / "log" / "slurm-k8s-power.log"
    return path.read_text() if path.exists() else ""


def report(name: str, value: float) -> None:
    print("\nMEASURE %s: %.1f s" % (name, value))


# -------------------------------------------------------------------------------------------- tests
def test_burst_nodes_start_powered_down(power):
    cluster, fake = power[0], power[1]
    wait_for(lambda: all(node_state(cluster, n) == "idle~" for n in BURST), 30, "burst nodes idle~")
    assert all(node_state(cluster, n) == "idle" for n in ("n1", "n2"))
    assert fake.pods == {}


def test_job_powers_a_node_up_runs_and_the_node_powers_down(power):
    cluster, fake, kubelet = power
    kubelet.stuck = False
    with Watcher(cluster) as watcher:
        submitted = time.monotonic()
        job = submit(cluster, 3)
        node = wait_for(lambda: job_info(cluster, job).get("NodeList") in BURST and job_info(cluster, job)["NodeList"],
                        15, "job %s to get a burst node" % job, interval=0.1)
        allocated = time.monotonic()
        wait_for(lambda: node in fake.pods, 15, "pod %s created" % node, interval=0.05)
        created = fake.calls("POST", node)[-1].time
        wait_for(lambda: node_state(cluster, node).rstrip("#~%") in ("alloc", "mix") and
                 not node_state(cluster, node).endswith("#"), 30, "%s registered" % node, interval=0.1)
        registered = time.monotonic()
        wait_for(lambda: job_info(cluster, job).get("JobState") in ("RUNNING", "COMPLETING", "COMPLETED"),
                 60, "job %s to start" % job, interval=0.1)
        started = time.monotonic()
        report("sbatch -> node allocated (idle~ -> alloc~)", allocated - submitted)
        report("sbatch -> pod POSTed by ResumeProgram", created - submitted)
        report("sbatch -> slurmd registered (alloc)", registered - submitted)
        report("sbatch -> job RUNNING", started - submitted)
        wait_for(lambda: job_info(cluster, job).get("JobState") == "COMPLETED", 30, "job %s COMPLETED" % job,
                 interval=0.1)
        ended = time.monotonic()
        wait_for(lambda: node not in fake.pods, 30, "pod %s deleted" % node, interval=0.1)
        deleted = time.monotonic()
        report("job COMPLETED -> pod deleted", deleted - ended)
        wait_for(lambda: node_state(cluster, node) == "idle~", 30, "%s idle~" % node)
        report("job COMPLETED -> node idle~", time.monotonic() - ended)
    states = watcher.states(node)
    # powering up with the job on it, then powering down and powered down
    assert any("POWERING_UP" in s and ("ALLOCATED" in s or "MIXED" in s) for s in states), states
    assert any("POWERING_DOWN" in s for s in states) or any("POWERED_DOWN" in s for s in states), states
    assert node_state(cluster, node) == "idle~"
    # the pod came from the template, named after the node, owned by the slurmctld StatefulSet
    post = [r for r in fake.calls("POST") if r.body["metadata"]["name"] == node][-1]
    assert post.body["metadata"]["annotations"]["hpc.slurm_k8s/resume-jobs"] == job
    assert post.body["metadata"]["ownerReferences"][0]["name"] == "slurmctld"
    delete = [r for r in fake.calls("DELETE") if r.path.endswith("/" + node)][-1]
    assert delete.body["gracePeriodSeconds"] == 3
    # the always-on nodes were never powered down
    for always_on in ("n1", "n2"):
        assert not any("POWER" in s for s in watcher.states(always_on)), watcher.states(always_on)
    # our share of the start latency: ResumeProgram runs within power_save_interval of the
    # allocation and creates the pod at once; the rest is slurmctld's (see docs/power-save.md)
    assert created - submitted <= 8, "pod created %.1f s after sbatch" % (created - submitted)
    if started - submitted > 15:
        print("\nNOTE: job start %.1f s after sbatch exceeds the 15 s target: Slurm 22.05 keeps the job "
              "CONFIGURING until its periodic job check (every 30 s) sees the powered-up node" % (started - submitted))


def test_stuck_pod_fails_resume_then_job_is_requeued_and_completes(power):
    cluster, fake, kubelet = power
    wait_for(lambda: all(node_state(cluster, n) == "idle~" for n in BURST), 30, "burst nodes idle~")
    kubelet.stuck = True
    with Watcher(cluster) as watcher:
        job = submit(cluster, 2)
        node = wait_for(lambda: job_info(cluster, job).get("NodeList") if job_info(cluster, job).get("NodeList")
                        not in (None, "", "(null)") else None, 15, "job %s to get a node" % job)
        wait_for(lambda: node in fake.pods, 15, "pod %s created" % node)
        assert fake.pods[node]["status"]["phase"] == "Pending"
        # ResumeTimeout: slurmctld marks the node DOWN+POWERED_DOWN, requeues the job and runs
        # ResumeFailProgram, which deletes the pod and returns the node to idle~
        wait_for(lambda: "resume-fail" in power_log(cluster) and node not in fake.pods,
                 TIMINGS["ResumeTimeout"] + 20, "resume-fail for %s" % node)
        kubelet.stuck = False   # the API behaves again
        wait_for(lambda: int(job_info(cluster, job).get("Restarts", "0")) >= 1, 30, "job %s requeued" % job)
        wait_for(lambda: job_info(cluster, job).get("JobState") == "COMPLETED", 180, "job %s COMPLETED" % job,
                 interval=0.5)
    states = watcher.states(node)
    assert "not resumed by ResumeTimeout" in (cluster.log_dir / "slurmctld.log").read_text()
    down = [i for i, s in enumerate(states) if s.startswith("DOWN") and "POWERED_DOWN" in s]
    assert down, states                                          # down~ after ResumeTimeout
    assert any(s.startswith("IDLE") and "POWERED_DOWN" in s for s in states[down[0]:]), states  # idle~
    log = power_log(cluster)
    assert re.search(r"resume-fail INFO %s: pod deleted" % re.escape(node), log), log
    assert re.search(r"resume-fail INFO .*%s.*state=resume" % re.escape(node), log), log
    for always_on in ("n1", "n2"):
        assert not any("POWER" in s for s in watcher.states(always_on)), watcher.states(always_on)
    print("\nstates of %s: %s" % (node, " -> ".join(states)))
