"""Tier T3: the Azimuth cluster type entry point (azimuth-slurm.yml) on a real Kubernetes.

Azimuth runs one playbook for everything; this drives it as Azimuth's runner would, with the same extra
variables (cluster_name, cluster_id, cluster_type, cluster_user_ssh_public_key, the ui-meta parameters,
cluster_state) and explicit target credentials (a kubeconfig, as the runner gets from its cloud).
Create: the platform owner SSHes in with the key Azimuth passed, to the address printed in `outputs`,
and runs a job on both workers. Update with one more worker: the entry point scales. Delete: every
pod, claim and the namespace are gone, and a second delete changes nothing.
Own cluster id (namespace slurm-azt-e2e), image tag (<version>-azimuth) and login port (30024).
"""

from __future__ import annotations

import json
import re

import pytest

from tests.k8s.cluster import SMALL_REQUESTS, SSH_OPTIONS
from tests.support.proc import ROOT, collection_version, playbook, run, wait_for

CLUSTER_ID = "azt-e2e"
NAMESPACE = "slurm-%s" % CLUSTER_ID
SSH_PORT = 30024
PLAYBOOK = ROOT / "azimuth-slurm.yml"


def outputs_of(proc):
    match = re.search(r"TASK \[Outputs\][^\n]*\nok: \[localhost\] => (\{\n.*?\n\})\n", proc.stdout, re.S)
    assert match, proc.stdout[-3000:]
    assert proc.stdout.rindex("TASK [") == proc.stdout.index("TASK [Outputs]"), "outputs must be the last task"
    return json.loads(match.group(1))["outputs"]


class Platform:
    def __init__(self, kube, workdir):
        self.kube = kube
        self.workdir = workdir
        self.key = workdir / "owner_ed25519"
        self.tag = "%s-azimuth" % collection_version()
        self.timings = {}

    def variables(self, **changes):
        """The extra variables Azimuth's runner passes (ui-meta parameters + its own), plus this site's."""
        variables = {
            "cluster_name": "azt", "cluster_id": CLUSTER_ID, "cluster_type": "slurm-k8s",
            "cluster_user_ssh_public_key": self.key.with_suffix(".pub").read_text().strip(),
            "slurmd_replicas": 2, "slurmd_cpus": 1, "slurmd_memory_mib": 512, "storage_home_size": "1Gi",
            # the cluster type's extraVars of this site
            "cluster_kubeconfig": str(self.kube.kubeconfig),
            "storage_class": "standard", "cluster_image_tag": self.tag, **SMALL_REQUESTS,
            "database_image": "hpc-slurm-k8s/mariadb-test:%s" % self.tag,
            "database_storage_size": "1Gi", "slurmctld_state_size": "1Gi",
            "login_service_type": "NodePort", "login_node_port": SSH_PORT, "platform_login_host": "127.0.0.1",
        }
        variables.update(changes)
        path = self.workdir / "vars.json"
        path.write_text(json.dumps(variables))
        return path

    def run(self, what, **changes):
        proc, changed, seconds = playbook(PLAYBOOK, self.variables(**changes), log_dir=self.workdir, env=self.kube.env)
        self.timings[what] = round(seconds, 1)
        return proc, changed

    def ssh(self, command, user, host, port):
        return run(["ssh", "-i", self.key, "-p", port, *SSH_OPTIONS, "%s@%s" % (user, host), command], timeout=180)

    def node_states(self):
        out = self.kube.exec(NAMESPACE, "slurmctld-0", "sinfo", "-h", "-N", "-o", "%N %t", container="slurmctld",
                             check=False).stdout
        return dict(line.split() for line in out.splitlines() if line.strip())


@pytest.fixture(scope="module")
def platform(kube, tmp_path_factory):
    platform = Platform(kube, tmp_path_factory.mktemp("azimuth"))
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "owner@azimuth", "-f", platform.key])
    kube.build_and_load_images(platform.tag)
    kube.delete_namespace(NAMESPACE)
    yield platform
    print("\nazimuth e2e timings (s): %s" % json.dumps(platform.timings))
    kube.delete_namespace(NAMESPACE)


def test_create_then_the_owner_logs_in_with_the_printed_address(platform):
    proc, changed = platform.run("create")
    assert changed > 0
    assert "platform 'azt' (id %s): site in namespace %s" % (CLUSTER_ID, NAMESPACE) in proc.stdout
    outputs = outputs_of(proc)
    assert outputs == {"cluster_name": "azt", "namespace": NAMESPACE, "workers": 2, "login_user": "azimuth",
                       "login_port": SSH_PORT, "login_host": "127.0.0.1",
                       "ssh_command": "ssh -p %s azimuth@127.0.0.1" % SSH_PORT}
    wait_for(lambda: platform.node_states() == {"slurmd-0": "idle", "slurmd-1": "idle"}, 90, "both workers idle")
    hosts = platform.ssh("srun -N2 hostname", outputs["login_user"], outputs["login_host"], outputs["login_port"])
    assert sorted(hosts.stdout.split()) == ["slurmd-0", "slurmd-1"]
    config = platform.kube.exec(NAMESPACE, "slurmctld-0", "scontrol", "show", "config", container="slurmctld").stdout
    assert "ClusterName=azt" in config.replace(" ", "")


def test_update_with_one_more_worker_scales(platform):
    proc, changed = platform.run("scale up", slurmd_replicas=3)
    assert changed > 0
    assert "): scale in namespace %s (2 -> 3 workers)" % NAMESPACE in proc.stdout
    assert "PLAY [Scale the slurmd workers" in proc.stdout
    assert outputs_of(proc)["workers"] == 3
    wait_for(lambda: platform.node_states() == {"slurmd-0": "idle", "slurmd-1": "idle", "slurmd-2": "idle"}, 120,
             "three workers idle")


def test_delete_removes_pods_claims_and_namespace_and_a_second_delete_changes_nothing(platform):
    assert platform.kube.pods(NAMESPACE) and platform.kube.get("pvc", namespace=NAMESPACE)["items"]
    proc, changed = platform.run("delete", slurmd_replicas=3, cluster_state="absent")
    assert changed > 0
    assert "): delete in namespace %s" % NAMESPACE in proc.stdout
    assert outputs_of(proc) == {}
    wait_for(lambda: platform.kube.get("namespace", NAMESPACE, check=False) is None, 180, "namespace %s gone" % NAMESPACE)
    proc, changed = platform.run("delete again", slurmd_replicas=3, cluster_state="absent")
    assert changed == 0, proc.stdout[-4000:]
    assert outputs_of(proc) == {}
