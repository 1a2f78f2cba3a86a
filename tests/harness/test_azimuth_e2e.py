"""Tier T3: the Azimuth cluster type entry point (azimuth-slurm.yml) on the Docker harness.

Azimuth runs one playbook for everything; this drives it as Azimuth's runner would, with the same extra
variables (cluster_name, cluster_id, cluster_type, cluster_user_ssh_public_key, the ui-meta parameters,
cluster_state). Render mode: kdock stands in for Kubernetes, and for a GitOps controller that prunes
a namespace whose manifests are all gone (teardown_delete_volumes, Azimuth's default, removes them all).
Create: the platform owner SSHes in with the key Azimuth passed, to the address printed in `outputs`,
and runs a job on both workers. Update with one more worker: the entry point scales. Delete: every
container and volume of the namespace is gone, and a second delete changes nothing.
Own cluster id (namespace slurm-azt-e2e), image tag (<version>-azimuth) and login port (30024).
"""

from __future__ import annotations

import json
import re
import sys

import pytest

from e2e_support import DOCKER, HERE, KDOCK, ROOT, collection_version, docker_connection, playbook, require_docker, run, wait_for

CLUSTER_ID = "azt-e2e"
NAMESPACE = "slurm-%s" % CLUSTER_ID
SSH_PORT = 30024
CTLD = "%s_slurmctld-0" % NAMESPACE
PLAYBOOK = ROOT / "azimuth-slurm.yml"

# The render command: apply the directory with kdock, or, once no manifest of the namespace is left,
# delete the namespace with its volumes (what Kubernetes does when a GitOps controller prunes it).
RECONCILE = """
import pathlib, subprocess, sys
kdock, render, namespace = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3]
if any((render / namespace).glob("*.yaml")):
    argv = [sys.executable, kdock, "apply", str(render), "--wait", "--timeout", "300"]
else:
    argv = [sys.executable, kdock, "delete", "--namespace", namespace, "--volumes"]
sys.exit(subprocess.run(argv, check=False).returncode)
"""


def outputs_of(proc):
    match = re.search(r"TASK \[Outputs\][^\n]*\nok: \[localhost\] => (\{\n.*?\n\})\n", proc.stdout, re.S)
    assert match, proc.stdout[-3000:]
    assert proc.stdout.rindex("TASK [") == proc.stdout.index("TASK [Outputs]"), "outputs must be the last task"
    return json.loads(match.group(1))["outputs"]


def node_states():
    out = run([DOCKER, "exec", CTLD, "sinfo", "-h", "-N", "-o", "%N %t"], check=False, timeout=60).stdout
    return dict(line.split() for line in out.splitlines() if line.strip())


class Platform:
    def __init__(self, workdir):
        self.workdir = workdir
        self.render_dir = workdir / "render"
        self.key = workdir / "owner_ed25519"
        self.tag = "%s-azimuth" % collection_version()
        self.timings = {}

    def variables(self, **changes):
        """The extra variables Azimuth's runner passes (ui-meta parameters + its own), plus the harness's."""
        variables = {
            "cluster_name": "azt", "cluster_id": CLUSTER_ID, "cluster_type": "slurm-k8s",
            "cluster_user_ssh_public_key": self.key.with_suffix(".pub").read_text().strip(),
            "slurmd_replicas": 2, "slurmd_cpus": 1, "slurmd_memory_mib": 512, "storage_home_size": "1Gi",
            # the cluster type's extraVars of this site: the harness
            "cluster_render_dir": str(self.render_dir),
            "cluster_render_command": [sys.executable, "-c", RECONCILE, KDOCK[1], str(self.render_dir), NAMESPACE],
            "cluster_slurmctld_connection": docker_connection(CTLD),
            "storage_class": "harness-rwx", "cluster_image_tag": self.tag,
            "database_image": "hpc-slurm-k8s/mariadb-test:%s" % self.tag,
            "login_service_type": "NodePort", "login_node_port": SSH_PORT, "platform_login_host": "127.0.0.1",
        }
        variables.update(changes)
        path = self.workdir / "vars.json"
        path.write_text(json.dumps(variables))
        return path

    def run(self, what, **changes):
        proc, changed, seconds = playbook(PLAYBOOK, self.variables(**changes), log_dir=self.workdir)
        self.timings[what] = round(seconds, 1)
        return proc, changed

    def ssh(self, command, user, host, port):
        return run(["ssh", "-i", str(self.key), "-p", str(port), "-o", "StrictHostKeyChecking=no",
                    "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "BatchMode=yes",
                    "%s@%s" % (user, host), command], timeout=120)


def namespace_containers():
    return run([DOCKER, "ps", "-a", "--filter", "label=kdock.namespace=%s" % NAMESPACE, "-q"]).stdout.split()


def namespace_volumes():
    return [v for v in run([DOCKER, "volume", "ls", "-q"]).stdout.split() if v.startswith("kdock-%s-" % NAMESPACE)]


@pytest.fixture(scope="module")
def platform(tmp_path_factory):
    require_docker()
    platform = Platform(tmp_path_factory.mktemp("azimuth"))
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "owner@azimuth", "-f", str(platform.key)])
    run(["bash", str(ROOT / "tests" / "images" / "build-images.sh"), platform.tag], timeout=1800)
    run(KDOCK + ["delete", "--namespace", NAMESPACE, "--volumes"], check=False)
    yield platform
    print("\nazimuth e2e timings (s): %s" % json.dumps(platform.timings))
    run(KDOCK + ["delete", "--namespace", NAMESPACE, "--volumes"], check=False)


def test_create_then_the_owner_logs_in_with_the_printed_address(platform):
    proc, changed = platform.run("create")
    assert changed > 0
    assert "platform 'azt' (id %s): site in namespace %s" % (CLUSTER_ID, NAMESPACE) in proc.stdout
    outputs = outputs_of(proc)
    assert outputs == {"cluster_name": "azt", "namespace": NAMESPACE, "workers": 2, "login_user": "azimuth",
                       "login_port": SSH_PORT, "login_host": "127.0.0.1",
                       "ssh_command": "ssh -p %s azimuth@127.0.0.1" % SSH_PORT}
    wait_for(lambda: node_states() == {"slurmd-0": "idle", "slurmd-1": "idle"}, 90, "both workers idle")
    hosts = platform.ssh("srun -N2 hostname", outputs["login_user"], outputs["login_host"], outputs["login_port"])
    assert sorted(hosts.stdout.split()) == ["slurmd-0", "slurmd-1"]
    assert "ClusterName=azt" in run([DOCKER, "exec", CTLD, "scontrol", "show", "config"]).stdout.replace(" ", "")


def test_update_with_one_more_worker_scales(platform):
    proc, changed = platform.run("scale up", slurmd_replicas=3)
    assert changed > 0
    assert "): scale in namespace %s (2 -> 3 workers)" % NAMESPACE in proc.stdout
    assert "PLAY [Scale the slurmd workers" in proc.stdout
    assert outputs_of(proc)["workers"] == 3
    wait_for(lambda: node_states() == {"slurmd-0": "idle", "slurmd-1": "idle", "slurmd-2": "idle"}, 90,
             "three workers idle")


def test_delete_removes_containers_and_volumes_and_a_second_delete_changes_nothing(platform):
    assert namespace_containers() and namespace_volumes()
    proc, changed = platform.run("delete", slurmd_replicas=3, cluster_state="absent")
    assert changed > 0
    assert "): delete in namespace %s" % NAMESPACE in proc.stdout
    assert outputs_of(proc) == {}
    assert namespace_containers() == []
    assert namespace_volumes() == []
    proc, changed = platform.run("delete again", slurmd_replicas=3, cluster_state="absent")
    assert changed == 0, proc.stdout[-4000:]
    assert outputs_of(proc) == {}
