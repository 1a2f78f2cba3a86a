"""Power saving as site.yml wires it: the powersave role's facts in slurm.conf (config role) and in the
slurmctld pod (slurmctld role), nothing at all without groups, and the rendered slurm.conf accepted
by a real slurmctld (Slurm 22.05 on this host) with a dynamic worker in the default partition.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import ROOT, VALUE_SETS, load_values

sys.path.insert(0, str(ROOT / "tests" / "integration"))
from slurmhost import SLURM_USER, ensure_munged  # noqa: E402  pylint: disable=wrong-import-position
from tests.support.proc import wait_for  # noqa: E402  pylint: disable=wrong-import-position

POWER_SETS = [name for name in VALUE_SETS if load_values(name).get("powersave_groups")]
PLAIN_SETS = [name for name in VALUE_SETS if name not in POWER_SETS]
# the role's MaxNodeCount default: the config role adds the burst nodes to it
MAX_NODE_COUNT = 1024
PORT_BASE = 18400


def slurm_conf(run):
    return run.get("ConfigMap", "slurm-config")["data"]["slurm.conf"]


def conf_keys(text):
    """Global key=value lines of a slurm.conf (node, node set and partition lines left out)."""
    keys = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and not re.match(r"^(NodeName|NodeSet|PartitionName)=", line):
            key, value = line.split("=", 1)
            keys[key] = value
    return keys


def conf_lines(text, first):
    return [line for line in text.splitlines() if line.startswith(first + "=")]


def slurmctld_pod(run):
    spec = run.get("StatefulSet", "slurmctld")["spec"]["template"]["spec"]
    return {v["name"]: v for v in spec["volumes"]}, {m["name"]: m for m in spec["containers"][0]["volumeMounts"]}


def slurmd_env(run):
    container = run.get("StatefulSet", "slurmd")["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value") for e in container["env"]}


@pytest.mark.parametrize("value_set", PLAIN_SETS)
def test_without_groups_nothing_of_power_saving_is_rendered(renders, value_set):
    run = renders[value_set]
    assert run.get("ConfigMap", "slurm-power") is None
    assert run.get("ServiceAccount", "slurmd-burst") is None
    assert run.get("NetworkPolicy", "slurmd-burst") is None
    text = slurm_conf(run)
    assert not re.search(r"^(Resume|Suspend)\w*=|State=CLOUD", text, re.M), text
    assert conf_keys(text)["MaxNodeCount"] == str(MAX_NODE_COUNT)
    volumes, mounts = slurmctld_pod(run)
    # the JWT key only with slurmrestd (roles/slurmrestd), which is not power saving's
    jwt = {"jwt-key"} if load_values(value_set).get("cluster_slurmrestd_enabled") else set()
    assert set(volumes) == {"config", "munge-key", "users"} | jwt
    assert set(mounts) == {"config", "munge-key", "users", "state"} | jwt


@pytest.mark.parametrize("value_set", POWER_SETS)
def test_slurm_conf_config_map_and_slurmctld_pod_fit_together(renders, value_set):
    run = renders[value_set]
    groups = load_values(value_set)["powersave_groups"]
    text = slurm_conf(run)
    keys = conf_keys(text)
    power = run.get("ConfigMap", "slurm-power")["data"]
    config = json.loads(power["config.json"])
    volumes, mounts = slurmctld_pod(run)
    # the three programs Slurm runs are the wrappers of the ConfigMap, mounted read-only and
    # executable (Slurm disables power saving without a word if they are group/world writable)
    items = {item["path"]: item for item in volumes["power"]["configMap"]["items"]}
    assert volumes["power"]["configMap"]["name"] == "slurm-power" and mounts["power"]["readOnly"] is True
    for key, command in (("ResumeProgram", "resume"), ("SuspendProgram", "suspend"), ("ResumeFailProgram", "resume-fail")):
        assert keys[key] == "%s/%s" % (mounts["power"]["mountPath"], command)
        assert items[command]["mode"] == 0o555
        assert power[command].splitlines()[-1] == 'exec /usr/bin/python3 -I /usr/local/lib/hpc-slurm-k8s/slurm_k8s_power.py --config %s/config.json %s "$@"' % (
            mounts["power"]["mountPath"], command)
    # PrologSlurmctld: the program waits for the burst nodes of a job on them (so that slurmctld launches it once
    # they have registered, not at its next 30 s periodic job check); another job's prolog is one shell fork
    assert keys["PrologSlurmctld"] == "%s/prolog" % mounts["power"]["mountPath"]
    assert items["prolog"]["mode"] == 0o555
    assert '  %s) exec /usr/bin/python3 -I /usr/local/lib/hpc-slurm-k8s/slurm_k8s_power.py --config %s/config.json prolog "$SLURM_JOB_NODELIST" ;;' % (
        "|".join("*slurmd-%s-*" % g["name"] for g in groups), mounts["power"]["mountPath"]) in power["prolog"].splitlines()
    assert power["prolog"].splitlines()[-1] == "exit 0"
    assert [g["resume_timeout"] for g in config["groups"]] == [g.get("resume_timeout", 600) for g in groups]
    # the program finds its pod templates in the same volume, its token and CA in the projected one
    assert items["config.json"]["mode"] == 0o444
    for group in config["groups"]:
        assert group["pod_template"] == "%s/%s" % (mounts["power"]["mountPath"], Path(group["pod_template"]).name)
        assert items[Path(group["pod_template"]).name]["mode"] == 0o444
    token = volumes["power-token"]["projected"]["sources"]
    assert config["token_file"] == mounts["power-token"]["mountPath"] + "/" + token[0]["serviceAccountToken"]["path"]
    assert config["ca_file"] == mounts["power-token"]["mountPath"] + "/" + token[1]["configMap"]["items"][0]["path"]
    assert config["namespace"] == run.get("StatefulSet", "slurmctld")["metadata"]["namespace"]
    assert [(g["name"], g["count"], g["prefix"]) for g in config["groups"]] == \
        [(g["name"], g["count"], "slurmd-%s-" % g["name"]) for g in groups]
    # timeouts: the global ones are the largest of the groups (slurmctld also uses them)
    assert keys["ResumeTimeout"] == str(max(g.get("resume_timeout", 600) for g in groups))
    assert keys["SuspendTimeout"] == str(max(g.get("suspend_timeout", 60) for g in groups))
    assert keys["SuspendExcStates"] == "DYNAMIC_NORM"
    assert "SuspendTime" not in keys, "no global SuspendTime: the always-on workers are never powered down"
    # every burst node counts against MaxNodeCount: the room for dynamic nodes stays
    assert keys["MaxNodeCount"] == str(MAX_NODE_COUNT + sum(g["count"] for g in groups))
    # one CLOUD NodeName line and one partition per group; the default partition is the NodeSet of
    # the always-on workers, whose Feature the slurmd pods register with, and no burst node has it
    nodes, partitions = conf_lines(text, "NodeName"), conf_lines(text, "PartitionName")
    for group in groups:
        hostlist = "slurmd-%s-[0-%d]" % (group["name"], group["count"] - 1)
        assert any(line.startswith("NodeName=%s State=CLOUD " % hostlist) for line in nodes), nodes
        partition = group.get("partition") or group["name"]
        assert any(line.startswith("PartitionName=%s Nodes=%s " % (partition, hostlist)) for line in partitions)
    assert conf_lines(text, "NodeSet") == ["NodeSet=k8s Feature=k8s"]
    # (edge-accepted adds keys of its own after these)
    assert partitions[0].startswith("PartitionName=compute Nodes=k8s Default=YES MaxTime=INFINITE State=UP")
    assert "Feature=k8s" in slurmd_env(run)["SLURMD_NODE_CONF"].split()
    # (a group without features has no Feature= at all: edge-accepted)
    assert not any("k8s" in re.findall(r"Feature=(\S+)", line)[0].split(",")
                   for line in nodes if "Feature=" in line)
    assert not re.search(r"Nodes=(\S*,)?ALL\b", text)


# --- a real slurmctld --------------------------------------------------------------------------

def _host_conf(text, workdir, power_dir):
    """The rendered slurm.conf with what ties it to the pod replaced by this host's values: the pod's
    name, ports, paths, accounting (no slurmdbd here), the program paths (the wrappers are written to
    power_dir), and Slurm 22.05's needs (cloud_reg_addrs; no SuspendExcStates, a 23.02 key)."""
    hostname = socket.gethostname().split(".")[0]
    replace = {
        "SlurmctldHost": "%s(127.0.0.1)" % hostname,
        "SlurmctldPort": str(PORT_BASE + 17),
        "SlurmdPort": str(PORT_BASE + 18),
        "StateSaveLocation": str(workdir / "state"),
        "SlurmdSpoolDir": str(workdir / "spool" / "%n"),
        "AccountingStorageType": "accounting_storage/none",
        "ResumeProgram": str(power_dir / "resume"),
        "SuspendProgram": str(power_dir / "suspend"),
        "ResumeFailProgram": str(power_dir / "resume-fail"),
        "PrologSlurmctld": str(power_dir / "prolog"),
    }
    drop = ("AccountingStorageHost", "AccountingStoragePort", "SuspendExcStates")
    lines = []
    for line in text.splitlines():
        key = line.partition("=")[0]
        if key in drop:
            continue
        lines.append("%s=%s" % (key, replace.pop(key)) if key in replace else line)
    assert not replace, "keys missing from the rendered slurm.conf: %s" % replace
    lines += ["SlurmctldPidFile=%s" % (workdir / "run" / "slurmctld.pid"),
              "SlurmdPidFile=%s" % (workdir / "run" / "slurmd-%n.pid"),
              "SlurmctldLogFile=%s" % (workdir / "log" / "slurmctld.log"),
              "SlurmdLogFile=%s" % (workdir / "log" / "slurmd-%n.log"),
              "SlurmctldParameters=cloud_reg_addrs", "PrivateData=cloud"]
    return "\n".join(lines) + "\n"


@pytest.fixture(name="host_slurm")
def fixture_host_slurm():
    missing = [tool for tool in ("slurmctld", "slurmd", "scontrol", "munge") if not shutil.which(tool)
               and not Path("/usr/sbin", tool).exists()]
    if missing or os.geteuid() != 0:
        message = "a real slurmctld needs root and %s" % (", ".join(missing) or "nothing more")
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    # not under pytest's basetemp (0700): slurmctld runs as SlurmUser
    top = Path(tempfile.mkdtemp(prefix="hpc-static-slurmctld-"))
    top.chmod(0o755)
    procs = []
    yield top, procs
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    shutil.rmtree(top, ignore_errors=True)


# What scontrol must read back for a value set, (command, regex): tests/static/values/edge-accepted.yml holds
# values at the edges of what hpc.slurm_k8s.check_inputs accepts ('=' and ',' in a value, lists, booleans).
READ_BACK = {
    "edge-accepted": [
        (("show", "config"), r"^SchedulerParameters\s+= bf_interval=30,default_queue_depth=100$"),
        (("show", "config"), r"^DebugFlags\s+= Backfill,Power$"),
        (("show", "config"), r"^MaxJobCount\s+= 12345$"),
        (("show", "partition", "compute"), r"\bDefault=YES\b"),
        (("show", "partition", "compute"), r"\bExclusiveUser=NO\b"),
        (("show", "partition", "edge"), r"\bMaxTime=1-00:00:00\b"),
        (("show", "partition", "edge"), r"\bHidden=NO\b"),
        (("show", "node", "slurmd-edge-0"), r"\bWeight=10\b"),
    ],
}


@pytest.mark.parametrize("value_set", POWER_SETS)
def test_slurm_conf_is_accepted_by_a_real_slurmctld(renders, value_set, host_slurm):
    top, procs = host_slurm
    run = renders[value_set]
    groups = load_values(value_set)["powersave_groups"]
    power_dir = top / "power"
    for sub in ("etc", "log", "state", "spool", "run", "power"):
        (top / sub).mkdir()
        if sub in ("log", "state", "spool", "run"):
            shutil.chown(top / sub, SLURM_USER, SLURM_USER)
    # the wrappers as the slurmctld pod has them: root-owned, 0555 (Slurm checks both)
    data = run.get("ConfigMap", "slurm-power")["data"]
    for command in ("resume", "suspend", "resume-fail", "prolog"):
        (power_dir / command).write_text(data[command])
        (power_dir / command).chmod(0o555)
    power_dir.chmod(0o755)
    conf = top / "etc" / "slurm.conf"
    conf.write_text(_host_conf(slurm_conf(run), top, power_dir))
    env = dict(os.environ, SLURM_CONF=str(conf))
    log = top / "log" / "slurmctld.log"

    def scontrol(*args):
        return subprocess.run(["scontrol", *args], capture_output=True, text=True, env=env, check=False).stdout

    ensure_munged()
    started = time.monotonic()
    with open(top / "log" / "slurmctld.out", "wb") as out:
        procs.append(subprocess.Popen(["slurmctld", "-D", "-i", "-f", str(conf)], stdout=out, stderr=out, env=env,
                                      start_new_session=True))
    wait_for(lambda: "UP" in scontrol("ping"), 20, "slurmctld to answer", interval=0.2, log=log)
    # an always-on worker as its pod starts it: slurmd -b -Z with the rendered SLURMD_NODE_CONF
    (top / "spool" / "slurmd-0").mkdir()
    with open(top / "log" / "slurmd.out", "wb") as out:
        procs.append(subprocess.Popen(["slurmd", "-D", "-b", "-Z", "-N", "slurmd-0", "--conf",
                                       slurmd_env(run)["SLURMD_NODE_CONF"], "-f", str(conf)],
                                      stdout=out, stderr=out, env=env, start_new_session=True))
    wait_for(lambda: "State=IDLE" in scontrol("show", "node", "slurmd-0"), 20, "slurmd-0 to register", interval=0.2, log=log)
    print("\nslurmctld 22.05 up and a dynamic worker registered in %.1f s" % (time.monotonic() - started))

    text = log.read_text()
    # what 22.05 logs when it refuses the power-save settings (e.g. a group-writable wrapper); it logs
    # nothing when it accepts them
    assert "power_save module disabled" not in text, text
    assert "error: Parsing" not in text and "fatal:" not in text, text
    config = scontrol("show", "config")
    assert re.search(r"^ResumeProgram\s+= %s/resume$" % re.escape(str(power_dir)), config, re.M), config
    assert re.search(r"^MaxNodeCount\s+= %d$" % (MAX_NODE_COUNT + sum(g["count"] for g in groups)), config, re.M), config
    # the default partition takes the dynamic worker through NodeSet k8s, and no burst node
    compute = scontrol("show", "partition", "compute")
    assert "NodeSets=k8s" in compute and re.search(r"^\s+Nodes=slurmd-0$", compute, re.M), compute
    for group in groups:
        partition = scontrol("show", "partition", group.get("partition") or group["name"])
        assert re.search(r"^\s+Nodes=slurmd-%s-\[0-%d\]$" % (group["name"], group["count"] - 1), partition, re.M), partition
        node = scontrol("show", "node", "slurmd-%s-0" % group["name"])
        assert re.search(r"State=IDLE\+CLOUD\+POWERED_DOWN ", node), node
        assert re.search(r"Partitions=%s\s*$" % re.escape(group.get("partition") or group["name"]), node, re.M), node
    for command, expected in READ_BACK.get(value_set, []):
        shown = scontrol(*command)
        assert re.search(expected, shown, re.M), "%s: %s not in\n%s" % (" ".join(command), expected, shown)
