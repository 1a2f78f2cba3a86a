"""A Slurm cluster deployed by the collection into one namespace of the local Kubernetes."""

from __future__ import annotations

import json
import re
import shlex
import time
from pathlib import Path

from tests.support.proc import ROOT, playbook, run, wait_for

SSH_OPTIONS = ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
               "-o", "BatchMode=yes", "-o", "ConnectTimeout=20"]


# What a job of alice prints: the variable her ~/.profile exports (set by jobs_with_the_users_login_environment),
# the two variables of the shell that submitted it, and the job's LD_PRELOAD (the image preloads a library into
# slurmd, which its jobs must not inherit)
LOGIN_ENVIRONMENT_PROBE = ('echo "profile=${SLURM_K8S_PROFILE:-} submitter=${SUBMITTER:-} listed=${LISTED:-} '
                           'preload=${LD_PRELOAD:-}"')
# sbatch option -> what the job prints: the login environment in each, the submitter's variables as the option says
LOGIN_ENVIRONMENT_JOBS = {
    "--export=NONE": "profile=read submitter= listed= preload=",
    "--export=LISTED": "profile=read submitter= listed=yes preload=",
    "--get-user-env": "profile=read submitter=yes listed=yes preload=",
}
# what slurmd logs when it loads a login environment by fork (Slurm's own words)
FORK_FALLBACK = "pid or mnt namespaces are disabled, avoiding clone and falling back to fork"
# what site.yml writes to judge a changed slurm.conf before it applies it (roles/config/tasks/check.yml): the
# short-lived pod in which each image's Slurm parses it, applied and deleted
CONFIG_CHECK_WRITES = frozenset({("patch", "pods", "slurm-config-check"), ("delete", "pods", "slurm-config-check")})
# four MPI ranks, each printing its rank, the size and its pod (python3-mpi4py, on Open MPI, in the node image)
MPI_HELLO = ("python3 -c 'from mpi4py import MPI; c = MPI.COMM_WORLD; "
             "print(c.Get_rank(), c.Get_size(), MPI.Get_processor_name())'")
# the Slurm majors whose Debian packages have Slurm's mpi/pmix plugin (Debian removed it from 26.05: #1149781)
PMIX_MAJORS = frozenset({"24.11"})
# the slurmctld pod's state volume (config role's StateSaveLocation)
STATE_SAVE_LOCATION = "/var/spool/slurmctld"


def assert_four_ranks_on_both_pods(out):
    ranks = sorted(line.split() for line in out.splitlines() if line.strip())
    assert [r[0] for r in ranks] == ["0", "1", "2", "3"] and all(r[1] == "4" for r in ranks), out
    assert {r[2] for r in ranks} == {"slurmd-0", "slurmd-1"}, out


def assert_mpi_across_both_pods(cluster, major):
    """Four ranks over slurmd-0 and slurmd-1 as alice: srun --mpi=pmix exactly where `major`'s plugin exists,
    and mpirun inside a batch job's allocation on every major."""
    plugins = cluster.ssh("srun --mpi=list").stdout.split()
    assert ("pmix" in plugins) == (major in PMIX_MAJORS), (major, plugins)
    if "pmix" in plugins:
        assert_four_ranks_on_both_pods(cluster.ssh("srun --mpi=pmix -N2 -n4 --overcommit " + MPI_HELLO, timeout=240).stdout)
    job = cluster.ssh("sbatch --parsable --wait -N2 -n4 --overcommit -o mpirun-%%j.out --wrap %s"
                      % shlex.quote("mpirun " + MPI_HELLO), timeout=240).stdout.strip()
    assert_four_ranks_on_both_pods(cluster.ssh("cat mpirun-%s.out" % job).stdout)


# The node's 2 CPUs serve every test cluster at once (three test modules and a Molecule scenario run
# side by side) and the scheduler counts requests, not use: small requests, the usual limits
# (Burstable pods). An idle Slurm cluster uses ~0.05 CPU.
SMALL_REQUESTS = {
    "slurmd_cpu_request": "50m",
    **{"%s_resources" % role: {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"cpu": "2", "memory": "1Gi"}}
       for role in ("slurmctld", "slurmdbd", "login", "slurmrestd")},
    "database_resources": {"requests": {"cpu": "50m", "memory": "256Mi"}, "limits": {"cpu": "2", "memory": "1Gi"}},
}


class SlurmOnKube:
    """site.yml's variables for the API backend, and the ways into the cluster it makes.

    login_port: each test module has its own NodePort in 30000-30085, the band the API server keeps
    for ports asked for by number (ports it picks at random, e.g. for Molecule's login, come from above)."""

    def __init__(self, kube, workdir: Path, name: str, tag: str, login_port: int, **variables):
        self.kube, self.workdir, self.tag, self.login_port = kube, workdir, tag, login_port
        self.namespace = "slurm-%s" % name
        self.vars_file = workdir / "vars.json"
        self.key = workdir / "alice_ed25519"
        self.timings: dict[str, float] = {}
        if not self.key.exists():
            run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "alice@%s" % name, "-f", self.key])
        self.variables = {
            "cluster_name": name,
            "cluster_kubeconfig": str(kube.kubeconfig),
            "cluster_image_tag": tag,
            "storage_class": "standard",
            "storage_home_size": "1Gi",
            "database_storage_size": "1Gi",
            "slurmctld_state_size": "1Gi",
            "database_image": "hpc-slurm-k8s/mariadb-test:%s" % tag,
            "login_service_type": "NodePort",
            "login_node_port": login_port,
            "slurmd_replicas": 2,
            "slurmd_cpus": 2,
            "slurmd_memory_mib": 1024,
            **SMALL_REQUESTS,
            "config_users": [{"name": "alice", "uid": 2001,
                              "authorized_keys": [self.key.with_suffix(".pub").read_text().strip()]}],
        }
        if variables.get("cluster_render_dir"):
            # render mode touches no cluster: the API's settings are refused with it
            del self.variables["cluster_kubeconfig"]
        self.save(**variables)

    def save(self, **changes):
        self.variables.update(changes)
        self.vars_file.write_text(json.dumps(self.variables))

    def playbook(self, name, *extra, check=True, when_output=None, vars_file=None, env=None):
        path = ROOT / "playbooks" / ("%s.yml" % name) if not str(name).endswith(".yml") else Path(name)
        return playbook(path, vars_file or self.vars_file, *extra, check=check, log_dir=self.workdir,
                        when_output=when_output, env=dict(self.kube.env, **(env or {})))

    def site(self, *extra, check=True):
        return self.playbook("site", *extra, check=check)

    # --- the ways in ----------------------------------------------------------------------------------
    def ctld(self, *command, check=True, timeout=120):
        return self.kube.exec(self.namespace, "slurmctld-0", *command, container="slurmctld", check=check,
                              timeout=timeout)

    def maria(self, sql=None, stdin=None, database=""):
        """SQL as MariaDB's root in the mariadb pod (the statement passed as an argument, so any quoting in it
        stays; or `stdin` into `database`); its tab-separated output without headers."""
        script = 'MYSQL_PWD="$(cat "$MARIADB_ROOT_PASSWORD_FILE")" mariadb -uroot -N %s' % database
        return self.kube.exec(self.namespace, "mariadb-0", "sh", "-c", script + (' -e "$0"' if sql else ""),
                              *([sql] if sql else []), container="mariadb", input=stdin).stdout.strip()

    def run_modules(self, slurm_major):
        """The node and queue modules in the slurmctld pod through a kubernetes.core.kubectl connection
        (tests/k8s/playbooks/modules_in_the_slurmctld_pod.yml), the nodes on `slurm_major`; they end idle."""
        inventory = self.workdir / "slurmctld.ini"
        inventory.write_text(
            "slurmctld ansible_connection=kubernetes.core.kubectl ansible_kubectl_namespace=%s "
            "ansible_kubectl_pod=slurmctld-0 ansible_kubectl_container=slurmctld ansible_kubectl_kubeconfig=%s "
            "ansible_python_interpreter=/usr/bin/python3\n" % (self.namespace, self.kube.kubeconfig))
        run(["ansible-playbook", "-i", inventory, "-e", "slurm_major=%s" % slurm_major,
             ROOT / "tests" / "k8s" / "playbooks" / "modules_in_the_slurmctld_pod.yml"], timeout=300, env=self.kube.env)
        self.wait_nodes({"slurmd-0": "idle", "slurmd-1": "idle"}, 30)

    def ssh(self, command, timeout=180, check=True, user="alice", key=None):
        return run(["ssh", "-i", key or self.key, "-p", self.login_port, *SSH_OPTIONS, "%s@127.0.0.1" % user,
                    command], timeout=timeout, check=check)

    def wait_for_login(self, timeout=120):
        """Until alice's SSH through the login NodePort works: a Ready login pod does not mean that
        kube-proxy already forwards the NodePort (a fresh Service can refuse connections for a while)."""
        wait_for(lambda: self.ssh("true", timeout=30, check=False).returncode == 0, timeout,
                 "SSH through the login NodePort %s" % self.login_port)

    def nodes(self):
        """name -> (state, reason) as sinfo shows them."""
        out = self.ctld("sinfo", "-h", "-N", "-o", "%N|%t|%E", check=False).stdout
        return dict((n, (s, r)) for n, s, r in (line.split("|") for line in out.splitlines() if line.count("|") == 2))

    def node_states(self):
        return {name: state for name, (state, _reason) in self.nodes().items()}

    def wait_nodes(self, states, timeout=120):
        wait_for(lambda: self.node_states() == states, timeout, "nodes %s (last: %s)" % (states, self.node_states()))

    def slurmd_debug_levels(self):
        """slurmd pod -> the log level its running slurmd reports (`scontrol show slurmd` asks the daemon in
        that pod, not slurmctld): 3 is SlurmdDebug=info, 5 debug."""
        levels = {}
        for pod in self.kube.pods(self.namespace, "app.kubernetes.io/name=slurmd"):
            out = self.kube.exec(self.namespace, pod, "scontrol", "show", "slurmd", container="slurmd", check=False).stdout
            found = re.search(r"^Slurmd Debug\s*=\s*(\d+)", out, re.M)
            levels[pod] = found and found.group(1)
        return levels

    def job_state(self, job):
        return self.ctld("squeue", "-h", "-j", job, "-o", "%T", check=False).stdout.strip()

    def accounted_state(self, job):
        return self.ctld("sacct", "-n", "-X", "-j", job, "-o", "State", check=False).stdout.split()

    def associations(self, fields="account,user"):
        """Slurm's associations as a set of `field|field` rows (sacctmgr does not define their order)."""
        out = self.ctld("sacctmgr", "--parsable2", "--noheader", "show", "association", "format=%s" % fields).stdout
        return set(out.split())

    def jobs_with_the_users_login_environment(self, node, options=tuple(LOGIN_ENVIRONMENT_JOBS)):
        """Run alice's batch jobs that make slurmd load her login environment (SLURM_GET_USER_ENV: `su - alice`
        on the node), one per sbatch option of LOGIN_ENVIRONMENT_JOBS, on `node`, one after the other:
        option -> what the job printed (LOGIN_ENVIRONMENT_PROBE)."""
        self.ssh("grep -qx 'export SLURM_K8S_PROFILE=read' ~/.profile || echo 'export SLURM_K8S_PROFILE=read' >>~/.profile")
        printed = {}
        for option in options:
            job = self.ssh("SUBMITTER=yes LISTED=yes sbatch --parsable --wait -w %s %s -o login-env-%%j.out --wrap %s"
                           % (node, option, shlex.quote(LOGIN_ENVIRONMENT_PROBE)), timeout=120).stdout.strip()
            printed[option] = self.ssh("cat login-env-%s.out" % job).stdout.strip()
        return printed

    def job_state_saved_since(self, moment):
        """Whether slurmctld has written its job_state file after `moment` (time.time(); the pods share this
        machine's clock). slurmctld saves its state in the background, at most 5 s after a change (Slurm's
        SAVE_MAX_WAIT): a job acknowledged before `moment` is on the state volume once this is true."""
        out = self.ctld("stat", "-c", "%.9Y", "%s/job_state" % STATE_SAVE_LOCATION, check=False).stdout.strip()
        return bool(out) and float(out) > moment

    def sigkill_slurmctld(self, forget=()):
        """SIGKILL to the slurmctld process in its container, as the kernel's OOM killer sends it (no shutdown, no
        last save); the files `forget` removed from StateSaveLocation in the same instant (with their .old copies),
        as a kill before slurmctld ever wrote them leaves the directory. The kubelet restarts the container."""
        removed = " ".join("%s/%s %s/%s.old" % (STATE_SAVE_LOCATION, name, STATE_SAVE_LOCATION, name) for name in forget)
        script = ('rm -f %s; for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = slurmctld ] && kill -KILL "${p#/proc/}"; '
                  'done; exit 0' % removed)
        # the exec ends with the container (its processes go with it): its own status says nothing
        self.ctld("sh", "-c", script, check=False, timeout=60)

    def sbatch(self, *args):
        return self.ctld("sbatch", "--parsable", *args).stdout.strip().split(";")[0]

    def pods_ready(self):
        pods = self.kube.pods(self.namespace)
        return bool(pods) and all(self.kube.is_ready(pod) for pod in pods.values())

    def delete(self):
        started = time.monotonic()
        self.kube.delete_namespace(self.namespace)
        self.timings["namespace_delete_s"] = time.monotonic() - started
