"""Tier T3: site.yml renders the manifests, kdock runs them on Docker, real Slurm 24.11 jobs run.

The images are built from images/slurm (and the MariaDB stand-in) by build-images.sh; the cluster is
deployed by `ansible-playbook playbooks/site.yml` in render mode, whose render command is kdock.
Then a user SSHes into the login pod on 127.0.0.1 and runs jobs, daemons are restarted, slurm.conf
is changed, and the collection's modules run against Slurm 24.11 inside the slurmctld container.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from e2e_support import DOCKER, HERE, KDOCK, ROOT, collection_version, docker_connection, playbook, require_docker, run, wait_for

NAMESPACE = "slurm-e2e"
SSH_PORT = 30022
CTLD = "%s_slurmctld-0" % NAMESPACE


def ctld(*command, check=True):
    return run([DOCKER, "exec", CTLD, *command], check=check, timeout=60)


def node_states():
    out = ctld("sinfo", "-h", "-N", "-o", "%N %t", check=False).stdout
    return dict(line.split() for line in out.splitlines() if line.strip())


class Deployment:
    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.render_dir = workdir / "render"
        self.key = workdir / "alice_ed25519"
        self.vars_file = workdir / "vars.json"
        self.timings = {}

    def prepare(self):
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "alice@e2e", "-f", str(self.key)])
        variables = {
            "cluster_name": "e2e",
            "cluster_render_dir": str(self.render_dir),
            "cluster_render_command": KDOCK + ["apply", str(self.render_dir), "--wait", "--timeout", "300"],
            "cluster_slurmctld_connection": docker_connection(CTLD),
            "storage_class": "harness-rwx",
            "cluster_image_tag": self.tag,
            "database_image": "hpc-slurm-k8s/mariadb-test:%s" % self.tag,
            "login_service_type": "NodePort",
            "login_node_port": SSH_PORT,
            "slurmd_replicas": 2,
            "slurmd_cpus": 2,
            "slurmd_memory_mib": 1024,
            "config_users": [{"name": "alice", "uid": 2001,
                              "authorized_keys": [self.key.with_suffix(".pub").read_text().strip()]}],
        }
        self.vars_file.write_text(json.dumps(variables))

    @property
    def tag(self):
        """Images of their own, so that another build of the shared tag cannot replace pods mid-test."""
        return "%s-e2e" % collection_version()

    def site(self, *extra):
        proc, changed, seconds = playbook(ROOT / "playbooks" / "site.yml", self.vars_file, *extra)
        return changed, seconds, proc.stdout

    def ssh(self, command, timeout=120):
        return run(["ssh", "-i", str(self.key), "-p", str(SSH_PORT), "-o", "StrictHostKeyChecking=no",
                    "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "BatchMode=yes",
                    "alice@127.0.0.1", command], timeout=timeout)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    require_docker()
    deployment = Deployment(tmp_path_factory.mktemp("e2e"))
    started = time.monotonic()
    run(["bash", str(ROOT / "tests" / "images" / "build-images.sh"), deployment.tag], timeout=1800)
    deployment.timings["image_builds_s"] = time.monotonic() - started
    run(KDOCK + ["delete", "--namespace", NAMESPACE, "--volumes"], check=False)
    deployment.prepare()
    changed, seconds, _output = deployment.site()
    deployment.timings["site_first_run_s"] = seconds
    assert changed > 0
    yield deployment
    print("\ne2e timings: %s" % json.dumps({k: round(v, 1) for k, v in deployment.timings.items()}))
    if os.environ.get("KEEP_E2E") != "1":
        run(KDOCK + ["delete", "--namespace", NAMESPACE, "--volumes"], check=False)


def test_second_run_changes_nothing(cluster):
    changed, seconds, out = cluster.site()
    cluster.timings["site_second_run_s"] = seconds
    assert changed == 0, out[-4000:]


def test_every_pod_ready_and_nodes_idle(cluster):
    status = run(KDOCK + ["status", NAMESPACE]).stdout
    rows = [line.split() for line in status.splitlines()[1:] if line.strip()]
    pods = dict((row[1].rsplit("-", 2)[0] if row[1].startswith("login-") else row[1], row[4:6]) for row in rows)
    assert pods == dict((pod, ["yes", "running"]) for pod in
                        ("login", "mariadb-0", "slurmdbd-0", "slurmctld-0", "slurmd-0", "slurmd-1")), status
    wait_for(lambda: node_states() == {"slurmd-0": "idle", "slurmd-1": "idle"}, 60, "both nodes idle")


def test_user_jobs_over_ssh_and_accounting(cluster):
    hosts = cluster.ssh("srun -N2 hostname").stdout.split()
    assert sorted(hosts) == ["slurmd-0", "slurmd-1"]
    job = cluster.ssh("sbatch --parsable --wait -N1 -o /home/alice/e2e-%j.out --wrap 'hostname; id -un'").stdout.strip()
    assert cluster.ssh("cat /home/alice/e2e-%s.out" % job).stdout.split()[1] == "alice"

    def completed():
        out = ctld("sacct", "-n", "-X", "-j", job, "-o", "State", check=False).stdout.split()
        return out == ["COMPLETED"]
    wait_for(completed, 30, "job %s COMPLETED in sacct" % job)


def test_mpi_with_pmix_across_two_pods(cluster):
    out = cluster.ssh("srun --mpi=pmix -N2 -n4 --overcommit python3 -c "
                      "'from mpi4py import MPI; c = MPI.COMM_WORLD; print(c.Get_rank(), c.Get_size(), MPI.Get_processor_name())'",
                      timeout=180).stdout
    ranks = sorted(line.split() for line in out.splitlines() if line.strip())
    assert [r[0] for r in ranks] == ["0", "1", "2", "3"] and all(r[1] == "4" for r in ranks)
    assert {r[2] for r in ranks} == {"slurmd-0", "slurmd-1"}


def test_slurmd_restart_brings_its_node_back(cluster):
    run([DOCKER, "restart", "%s_slurmd-1" % NAMESPACE])
    wait_for(lambda: node_states().get("slurmd-1") == "idle", 90, "slurmd-1 idle after its restart")
    assert cluster.ssh("srun -w slurmd-1 hostname").stdout.strip() == "slurmd-1"


def test_slurmctld_restart_keeps_pending_jobs_and_node_state(cluster):
    held = cluster.ssh("sbatch --parsable --hold --wrap 'true'").stdout.strip()
    ctld("scontrol", "update", "nodename=slurmd-1", "state=drain", "reason=e2e restart check")
    run([DOCKER, "restart", CTLD])
    wait_for(lambda: ctld("scontrol", "ping", check=False).stdout.count("UP") >= 1, 90, "slurmctld back")
    state = ctld("squeue", "-h", "-j", held, "-o", "%T %r").stdout.split()
    assert state[0] == "PENDING" and "Held" in state[1], state
    node = ctld("scontrol", "show", "node", "-o", "slurmd-1").stdout
    assert "DRAIN" in node and "e2e restart check" in node
    ctld("scancel", held)
    ctld("scontrol", "update", "nodename=slurmd-1", "state=resume")
    wait_for(lambda: node_states().get("slurmd-1") == "idle", 60, "slurmd-1 idle again")


def test_modules_against_slurm_24_11(cluster):
    run(["ansible-playbook", "-i", "%s," % CTLD, "-c", "community.docker.docker",
         "-e", "ansible_python_interpreter=/usr/bin/python3", str(HERE / "playbooks" / "modules_on_slurm_24_11.yml")],
        timeout=300)
    wait_for(lambda: node_states().get("slurmd-0") == "idle", 30, "slurmd-0 back in service")


def test_slurm_conf_change_is_applied_by_reconfigure_without_restart(cluster):
    started_at = run([DOCKER, "inspect", "-f", "{{.State.StartedAt}}", CTLD]).stdout.strip()
    changed, seconds, out = cluster.site("-e", '{"config_slurm_conf": {"MaxJobCount": 12345}}')
    cluster.timings["site_reconfigure_run_s"] = seconds
    assert changed > 0 and "Reconfigure Slurm" in out
    assert "12345" in ctld("scontrol", "show", "config").stdout.split("MaxJobCount")[1].split("\n")[0]
    assert run([DOCKER, "inspect", "-f", "{{.State.StartedAt}}", CTLD]).stdout.strip() == started_at, \
        "the slurmctld container was restarted for a slurm.conf change"
