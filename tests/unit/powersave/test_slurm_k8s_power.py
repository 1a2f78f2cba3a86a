# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""images/slurm/slurm_k8s_power.py against a fake Kubernetes API, run as Slurm runs it.

Every case starts the program as a process the way the powersave role's wrappers do, under ``env -i
SLURM_CONF=...`` (Slurm gives its power programs no PATH and no KUBERNETES_SERVICE_*):
``/usr/bin/python3 -I slurm_k8s_power.py ...``, with a fake ``scontrol`` (hostname expansion and a
record of ``update`` calls) so that this tier needs no Slurm.
"""

from __future__ import annotations

import json
import os
import py_compile
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from fakekube import FakeKube  # noqa: E402
from tests.support import power  # noqa: E402  pylint: disable=wrong-import-position

PROGRAM = power.PROGRAM
NAMESPACE = "slurm"

FAKE_SCONTROL = r'''#!/usr/bin/python3
"""Fake scontrol: 'show hostnames LIST' (prefix[a-b,c] and commas) and a record of 'update'."""
import re, sys
args = sys.argv[1:]
if args[:2] == ["show", "hostnames"]:
    out = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?", args[2]):
        m = re.fullmatch(r"(.*)\[(.*)\]", part)
        if not m:
            out.append(part)
            continue
        for rng in m.group(2).split(","):
            a, _, b = rng.partition("-")
            out += ["%s%d" % (m.group(1), i) for i in range(int(a), int(b or a) + 1)]
    print("\n".join(out))
elif args[:3] == ["show", "node", "--oneliner"]:
    # each node's states in turn, from a JSON file {node: [State, ...]}; the last one stays
    import json
    with open(__file__ + ".nodes") as handle:
        states = json.load(handle)
    with open(__file__ + ".log", "a") as log:
        log.write(" ".join(args) + "\n")
    if "fail-show" in open(__file__ + ".mode").read():
        sys.exit(1)
    for node in args[3].split(","):
        print("NodeName=%s Arch=x86_64 CoresPerSocket=1 State=%s ThreadsPerCore=1" % (node, states[node][0]))
        if len(states[node]) > 1:
            states[node].pop(0)
    with open(__file__ + ".nodes", "w") as handle:
        json.dump(states, handle)
elif args[:1] == ["update"]:
    with open(__file__ + ".log", "a") as log:
        log.write(" ".join(args) + "\n")
    sys.exit(1 if "fail-update" in open(__file__ + ".mode").read() else 0)
else:
    sys.exit(2)
'''

TEMPLATE = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"labels": {"app.kubernetes.io/name": "slurmd-burst"}},
    "spec": {
        "serviceAccountName": "slurmd-burst",
        "automountServiceAccountToken": False,
        "restartPolicy": "Always",
        "containers": [{
            "name": "slurmd", "image": "hpc-slurm-k8s/slurm:0.1.0", "args": ["slurmd"],
            "env": [{"name": "SLURMD_DYNAMIC", "value": "false"},
                    {"name": "SLURMD_NODENAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        }],
    },
}


def load_program():
    return power.load()


class Env:
    """Config, token, template, fake scontrol and fake API for one test."""

    def __init__(self, tmp: Path, fake: FakeKube, **config) -> None:
        self.tmp, self.fake = tmp, fake
        self.token = tmp / "token"
        self.token.write_text(fake.token + "\n")
        self.template = tmp / "pod-burst.json"
        self.template.write_text(json.dumps(TEMPLATE))
        self.scontrol = tmp / "scontrol"
        self.scontrol.write_text(FAKE_SCONTROL)
        self.scontrol.chmod(0o755)
        Path(str(self.scontrol) + ".mode").write_text("")
        self.log = tmp / "power.log"
        self.slurm_conf = tmp / "slurm.conf"
        self.slurm_conf.write_text("# not read by the fake scontrol\n")
        self.config = tmp / "config.json"
        data = {
            "api_server": fake.url, "namespace": NAMESPACE, "token_file": str(self.token),
            "ca_file": "", "scontrol": str(self.scontrol), "log_file": str(self.log),
            "owner_statefulset": "slurmctld", "request_timeout": 5, "terminating_wait": 5,
            "poll_interval": 0.2,
            "groups": [{"name": "burst", "prefix": "burst-", "count": 4,
                        "pod_template": str(self.template), "suspend_grace_period": 7, "resume_timeout": 20}],
        }
        data.update(config)
        self.config.write_text(json.dumps(data))

    def run(self, command: str, hostlist: str, extra_env: dict | None = None) -> subprocess.CompletedProcess:
        env = ["env", "-i", "SLURM_CONF=%s" % self.slurm_conf]
        env += ["%s=%s" % item for item in (extra_env or {}).items()]
        return subprocess.run(env + power.command(command, hostlist, "--config", self.config),
                              capture_output=True, text=True, timeout=60, check=False)

    def node_states(self, states: dict) -> None:
        """What the fake `scontrol show node` answers for each node, call after call (the last one stays)."""
        Path(str(self.scontrol) + ".nodes").write_text(json.dumps(states))

    def scontrol_calls(self) -> list[str]:
        path = Path(str(self.scontrol) + ".log")
        return path.read_text().splitlines() if path.exists() else []

    def log_text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def scontrol_updates(self) -> list[str]:
        path = Path(str(self.scontrol) + ".log")
        return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def fake():
    server = FakeKube(namespace=NAMESPACE).start()
    server.sts_uid = server.add_statefulset("slurmctld")
    yield server
    server.stop()


@pytest.fixture
def env(tmp_path, fake):
    return Env(tmp_path, fake)


# ----------------------------------------------------------------------------------------- static
def test_program_compiles_and_imports(tmp_path):
    py_compile.compile(str(PROGRAM), cfile=str(tmp_path / "prog.pyc"), doraise=True)
    module = load_program()
    assert module.COMMANDS == ("resume", "suspend", "resume-fail", "prolog")


def test_program_is_a_plain_module_not_group_writable():
    # a module that the wrappers run with /usr/bin/python3 -I (no shebang, no execute bit needed);
    # Slurm silently disables power saving for a program (the wrappers) that is group/world writable
    mode = PROGRAM.stat().st_mode
    assert not mode & 0o022 and not PROGRAM.read_text().startswith("#!")


def test_group_owns_only_its_nodes():
    module = load_program()
    group = module.Group({"name": "b", "prefix": "slurmd-burst-", "count": 10, "pod_template": "/x"})
    assert group.owns("slurmd-burst-0") and group.owns("slurmd-burst-9")
    for other in ("slurmd-burst-10", "slurmd-burst-01", "slurmd-0", "slurmd-burst-", "xslurmd-burst-1"):
        assert not group.owns(other), other


def test_invalid_config_is_a_config_error(tmp_path):
    module = load_program()
    with pytest.raises(module.ConfigError):
        module.Config({"api_server": "ftp://x", "namespace": "n", "token_file": "/t", "groups": []})
    with pytest.raises(module.ConfigError):
        module.Config({"api_server": "http://x", "namespace": "n", "token_file": "t", "groups": []})
    with pytest.raises(module.ConfigError):
        module.Config({"api_server": "http://x", "namespace": "n", "token_file": "/t", "groups": [{"name": "x"}]})


# ----------------------------------------------------------------------------------------- prolog
def test_prolog_waits_until_the_jobs_burst_nodes_have_registered(env, fake):
    env.node_states({"burst-0": ["ALLOCATED+CLOUD+POWERED_DOWN", "ALLOCATED+CLOUD+POWERING_UP", "ALLOCATED+CLOUD"],
                     "burst-1": ["ALLOCATED+CLOUD+POWERING_UP", "MIXED+CLOUD"]})
    started = time.monotonic()
    result = env.run("prolog", "n1,burst-[0-1]", {"SLURM_JOB_ID": "42"})
    assert result.returncode == 0, env.log_text()
    # one read of both burst nodes per poll, the always-on node left out; the third read finds both up
    assert env.scontrol_calls() == ["show node --oneliner burst-0,burst-1"] * 3
    assert re.search(r"prolog INFO job 42: every burst node registered after \d+[.]\d s", env.log_text()), env.log_text()
    assert time.monotonic() - started < 10
    assert fake.requests == []


def test_prolog_of_a_job_without_burst_nodes_reads_nothing(env):
    result = env.run("prolog", "n[1-2]", {"SLURM_JOB_ID": "7"})
    assert result.returncode == 0 and env.scontrol_calls() == []
    assert "job 7: no burst node" in env.log_text()


def test_prolog_leaves_a_node_that_went_down_to_slurm(env):
    env.node_states({"burst-2": ["ALLOCATED+CLOUD+POWERING_UP", "DOWN+CLOUD+POWERED_DOWN"]})
    result = env.run("prolog", "burst-2", {"SLURM_JOB_ID": "8"})
    assert result.returncode == 0 and len(env.scontrol_calls()) == 2
    assert "job 8: burst-2 DOWN: left to Slurm (ResumeTimeout, requeue)" in env.log_text()


def test_prolog_gives_up_at_the_groups_resume_timeout_and_still_exits_0(tmp_path, fake):
    env = Env(tmp_path, fake, groups=[{"name": "burst", "prefix": "burst-", "count": 4,
                                       "pod_template": str(tmp_path / "pod-burst.json"), "resume_timeout": 1}])
    env.node_states({"burst-0": ["ALLOCATED+CLOUD+POWERING_UP"]})
    result = env.run("prolog", "burst-0", {"SLURM_JOB_ID": "9"})
    assert result.returncode == 0
    assert "job 9: burst-0 not registered within its ResumeTimeout: left to Slurm" in env.log_text()


def test_prolog_exits_0_when_the_nodes_cannot_be_read(env):
    Path(str(env.scontrol) + ".mode").write_text("fail-show")
    env.node_states({"burst-0": ["ALLOCATED+CLOUD+POWERING_UP"]})
    result = env.run("prolog", "burst-0", {"SLURM_JOB_ID": "10"})
    assert result.returncode == 0
    assert re.search(r"prolog WARNING job 10: .*show node --oneliner burst-0: exit 1.*: launch left to slurmctld's "
                     r"periodic job check", env.log_text()), env.log_text()


# ----------------------------------------------------------------------------------------- resume
def test_resume_creates_one_pod_per_node_from_the_template(env, fake, tmp_path):
    resume_file = tmp_path / "resume.json"
    resume_file.write_text(json.dumps({
        "all_nodes_resume": "burst-[0-1]",
        "jobs": [{"job_id": 42, "nodes_resume": "burst-[0-1]", "partition": "burst"},
                 {"job_id": 43, "nodes_resume": "burst-1", "partition": "burst"}]}))
    result = env.run("resume", "burst-[0-1]", {"SLURM_RESUME_FILE": str(resume_file)})
    assert result.returncode == 0, env.log_text()
    posts = fake.calls("POST")
    assert sorted(p.body["metadata"]["name"] for p in posts) == ["burst-0", "burst-1"]
    body = next(p.body for p in posts if p.body["metadata"]["name"] == "burst-1")
    assert body["metadata"]["namespace"] == NAMESPACE
    assert body["metadata"]["labels"] == {"app.kubernetes.io/name": "slurmd-burst",
                                          "hpc.slurm-k8s/slurm-node": "burst-1",
                                          "hpc.slurm-k8s/burst-group": "burst"}
    assert body["metadata"]["annotations"] == {"hpc.slurm-k8s/resume-jobs": "42,43"}
    assert body["metadata"]["ownerReferences"] == [{
        "apiVersion": "apps/v1", "kind": "StatefulSet", "name": "slurmctld", "uid": fake.sts_uid,
        "controller": False}]
    assert body["spec"] == TEMPLATE["spec"]
    assert all(p.token == "token-1" for p in fake.requests)
    assert "burst-1: pod created (group burst)" in env.log_text()
    assert "resume file: nodes=burst-[0-1] jobs=42:burst-[0-1] 43:burst-1" in env.log_text()


def test_resume_file_of_slurm_22_05(env, fake, tmp_path):
    resume_file = tmp_path / "resume.json"
    resume_file.write_text(json.dumps({"jobs": [{"job_id": 7, "nodes": "burst-0"}], "all_nodes": "burst-0"}))
    assert env.run("resume", "burst-0", {"SLURM_RESUME_FILE": str(resume_file)}).returncode == 0
    assert fake.calls("POST")[0].body["metadata"]["annotations"] == {"hpc.slurm-k8s/resume-jobs": "7"}


def test_resume_file_gone_is_not_fatal(env, fake, tmp_path):
    result = env.run("resume", "burst-2", {"SLURM_RESUME_FILE": str(tmp_path / "vanished.json")})
    assert result.returncode == 0, env.log_text()
    assert "annotations" not in fake.calls("POST")[0].body["metadata"]
    assert "could not be read" in env.log_text()


@pytest.mark.parametrize("phase", ["Pending", "Running"])
def test_resume_leaves_a_live_pod_alone(env, fake, phase):
    fake.add_pod("burst-0", phase)
    assert env.run("resume", "burst-0").returncode == 0, env.log_text()
    assert fake.calls("POST") == [] and fake.calls("DELETE") == []
    assert "burst-0: pod already %s, nothing to do" % phase in env.log_text()


def test_resume_is_idempotent(env, fake):
    assert env.run("resume", "burst-[0-2]").returncode == 0
    assert env.run("resume", "burst-[0-2]").returncode == 0
    assert len(fake.calls("POST")) == 3 and len(fake.pods) == 3


@pytest.mark.parametrize("phase", ["Failed", "Succeeded"])
def test_resume_replaces_an_ended_pod(env, fake, phase):
    old = fake.add_pod("burst-3", phase)
    assert env.run("resume", "burst-3").returncode == 0, env.log_text()
    delete = fake.calls("DELETE")[0]
    assert delete.body["preconditions"] == {"uid": old["metadata"]["uid"]}
    assert delete.body["gracePeriodSeconds"] == 0
    assert fake.calls("POST")[0].time > delete.time
    assert fake.pods["burst-3"]["metadata"]["uid"] != old["metadata"]["uid"]


def test_resume_waits_for_a_terminating_pod_then_creates(tmp_path, fake):
    env = Env(tmp_path, fake, terminating_wait=20)
    old = fake.add_pod("burst-1", "Running", terminating=True)
    started = time.monotonic()
    threading.Timer(1.0, fake.remove_pod, args=("burst-1",)).start()
    assert env.run("resume", "burst-1").returncode == 0, env.log_text()
    post = fake.calls("POST")[0]
    assert post.time - started >= 1.0
    assert fake.calls("DELETE") == []
    assert fake.pods["burst-1"]["metadata"]["uid"] != old["metadata"]["uid"]
    assert "pod is terminating" in env.log_text()


def test_resume_gives_up_on_a_pod_stuck_terminating(tmp_path, fake):
    env = Env(tmp_path, fake, terminating_wait=1)
    fake.add_pod("burst-1", "Running", terminating=True)
    result = env.run("resume", "burst-[0-1]")
    assert result.returncode == 1
    assert [p.body["metadata"]["name"] for p in fake.calls("POST")] == ["burst-0"]
    assert "burst-1: pod burst-1 still terminating after 1 s" in env.log_text()
    assert "resume failed for 1 of 2 node(s): burst-1" in env.log_text()


def test_resume_conflict_looks_again(env, fake):
    # another resume call wins the race: the pod appears between our GET and our POST
    def race(method, path):
        if method == "POST" and "burst-2" not in fake.pods:
            fake.add_pod("burst-2", "Pending")
    fake.on_request = race
    assert env.run("resume", "burst-2").returncode == 0, env.log_text()
    assert [r.status for r in fake.calls("POST")] == [409]
    assert [r.method for r in fake.requests if r.method != "GET" or "pods" in r.path] == ["GET", "POST", "GET"]
    assert "409" in env.log_text() and "pod already Pending" in env.log_text()


def test_resume_refuses_nodes_of_no_group(env, fake):
    result = env.run("resume", "slurmd-0,burst-0")
    assert result.returncode == 1
    assert [p.body["metadata"]["name"] for p in fake.calls("POST")] == ["burst-0"]
    assert fake.calls(name="slurmd-0") == []
    assert "slurmd-0 is not a burst node of any group" in env.log_text()


def test_resume_without_owner_statefulset_fails_cleanly(env, fake):
    fake.statefulsets.clear()
    result = env.run("resume", "burst-0")
    assert result.returncode == 1
    assert fake.calls("POST") == []
    assert "statefulsets/slurmctld: 404" in env.log_text()


def test_resume_server_error_fails_that_node(env, fake):
    fake.faults["POST"] = [500]
    result = env.run("resume", "burst-0")
    assert result.returncode == 1
    assert "500 Injected" in env.log_text()


def test_api_unreachable(tmp_path, fake):
    env = Env(tmp_path, fake, api_server="http://127.0.0.1:9")
    result = env.run("suspend", "burst-0")
    assert result.returncode == 1
    assert "no answer" in env.log_text()


# ---------------------------------------------------------------------------------------- tokens
def test_token_file_is_read_again_on_every_call(env, fake):
    assert env.run("resume", "burst-0").returncode == 0
    # kubelet rotated the projected token: the old one is now refused
    fake.token = "token-2"
    env.token.write_text("token-2\n")
    assert env.run("suspend", "burst-0").returncode == 0, env.log_text()
    assert fake.calls("DELETE")[0].token == "token-2"


def test_expired_token_during_a_call_is_reread_after_401(env, fake):
    def rotate(method, path):
        if fake.token == "token-1" and method == "GET" and "/pods/" in path:
            fake.token = "token-2"        # the token the program already read has just expired
            env.token.write_text("token-2")
    fake.on_request = rotate
    assert env.run("resume", "burst-0").returncode == 0, env.log_text()
    statuses = [(r.method, r.token, r.status) for r in fake.requests if "/pods" in r.path]
    assert statuses[:2] == [("GET", "token-1", 401), ("GET", "token-2", 404)]
    assert "401 Unauthorized, reading the token again" in env.log_text()


def test_missing_token_fails_the_nodes(env, fake):
    env.token.unlink()
    assert env.run("suspend", "burst-0").returncode == 1
    assert fake.requests == []
    assert "cannot read the service account token" in env.log_text()


def test_missing_config_exits_2(tmp_path):
    result = subprocess.run(["env", "-i", *power.command("suspend", "x", "--config", tmp_path / "none.json")],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 2
    assert "cannot read configuration" in result.stderr


# --------------------------------------------------------------------------------------- suspend
def test_suspend_deletes_with_the_group_grace_period_and_404_is_success(env, fake):
    fake.add_pod("burst-0", "Running")
    assert env.run("suspend", "burst-[0-1]").returncode == 0, env.log_text()
    deletes = {r.path.rsplit("/", 1)[1]: r for r in fake.calls("DELETE")}
    assert deletes["burst-0"].status == 200 and deletes["burst-1"].status == 404
    assert deletes["burst-0"].body == {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 7,
                                       "propagationPolicy": "Background"}
    assert fake.calls("POST") == []
    assert "burst-1: no pod (already deleted)" in env.log_text()


def test_the_wrappers_argument_order(env, fake):
    # the powersave role's wrappers: exec /usr/bin/python3 -I <program> --config <mount>/config.json <command> "$@"
    fake.add_pod("burst-2")
    result = subprocess.run(["env", "-i", "SLURM_CONF=%s" % env.slurm_conf,
                             *power.command("--config", env.config, "suspend", "burst-2")],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, env.log_text()
    assert [r.path.rsplit("/", 1)[1] for r in fake.calls("DELETE")] == ["burst-2"]


def test_suspend_does_not_wait_for_the_pod_to_go(env, fake):
    fake.add_pod("burst-0", "Running")
    fake.on_delete = lambda pod, grace: 30.0   # stays Terminating for 30 s
    started = time.monotonic()
    assert env.run("suspend", "burst-0").returncode == 0
    assert time.monotonic() - started < 5
    assert fake.pods["burst-0"]["metadata"].get("deletionTimestamp")


# ----------------------------------------------------------------------------------- resume-fail
def test_resume_fail_deletes_pods_and_returns_nodes_to_service(env, fake):
    fake.add_pod("burst-0", "Pending")
    assert env.run("resume-fail", "burst-[0-1]").returncode == 0, env.log_text()
    assert sorted(r.path.rsplit("/", 1)[1] for r in fake.calls("DELETE")) == ["burst-0", "burst-1"]
    assert "burst-0" not in fake.pods
    assert env.scontrol_updates() == ["update nodename=burst-0,burst-1 state=resume"]


def test_resume_fail_reports_scontrol_failure(env, fake):
    Path(str(env.scontrol) + ".mode").write_text("fail-update")
    assert env.run("resume-fail", "burst-0").returncode == 1
    assert "returning nodes to service" in env.log_text()


def test_resume_fail_does_not_resume_a_node_whose_pod_could_not_be_deleted(env, fake):
    fake.faults["DELETE"] = [500]
    assert env.run("resume-fail", "burst-[0-1]").returncode == 1
    assert len(env.scontrol_updates()) == 1
    assert env.scontrol_updates()[0] in ("update nodename=burst-0 state=resume", "update nodename=burst-1 state=resume")


# ------------------------------------------------------------------------------------------ https
@pytest.fixture
def tls_files(tmp_path):
    if not shutil.which("openssl"):
        if os.environ.get("CI") == "true":
            pytest.fail("openssl is needed to test https")
        pytest.skip("openssl not installed")
    cert, key = tmp_path / "ca.crt", tmp_path / "ca.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=kubernetes", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


def test_https_with_the_configured_ca(tmp_path, tls_files):
    cert, key = tls_files
    server = FakeKube(namespace=NAMESPACE, certfile=str(cert), keyfile=str(key)).start()
    try:
        server.add_statefulset("slurmctld")
        env = Env(tmp_path, server, ca_file=str(cert))
        assert server.url.startswith("https://")
        assert env.run("resume", "burst-0").returncode == 0, env.log_text()
        assert "burst-0" in server.pods
        # without the CA the certificate is not trusted: the call fails, nothing is created
        env_no_ca = Env(tmp_path, server, ca_file="")
        assert env_no_ca.run("resume", "burst-1").returncode == 1
        assert "CERTIFICATE_VERIFY_FAILED" in env_no_ca.log_text()
    finally:
        server.stop()
