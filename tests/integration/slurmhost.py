"""Real Slurm daemons on this host, for integration tests and benchmarks (tier T2).

Debian's Slurm packages are built with multiple-slurmd support, so static nodes
``NodeName=n[1-4] NodeAddr=127.0.0.1 Port=[17001-17004]``, each started as ``slurmd -N nI``, make
a real multi-node cluster on one machine. Everything lives under one work directory with its own
ports, so several clusters (the test cluster and the 2,000-node benchmark controller) can coexist.

Used as a library by tests/integration/conftest.py and benchmarks/, and as a command:
    python3 tests/integration/slurmhost.py up DIR [--nodes 4] [--no-slurmd] [--no-accounting]
    python3 tests/integration/slurmhost.py down DIR
"""

from __future__ import annotations

import argparse
import fcntl
import functools
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.support.proc import wait_for  # noqa: E402  pylint: disable=wrong-import-position

SLURM_USER = "slurm"


class SlurmHostError(RuntimeError):
    """The host cluster could not be started or stopped; the message names the daemon and its log."""


# the daemons start in well under a second: poll often; a timeout is the host cluster's error
_wait = functools.partial(wait_for, interval=0.1, error=SlurmHostError)


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _process_running(pid: int) -> bool:
    """Whether process `pid` still runs: a zombie (exited, not yet reaped by this process, which started it)
    does not, and its sockets are closed."""
    try:
        stat = Path("/proc/%d/stat" % pid).read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def ensure_munged(timeout: float = 10.0) -> None:
    """Start the system munged (Debian's postinst created /etc/munge/munge.key) unless it answers.

    `make test` runs T0 (tests/static) and T2 at once, and both call this: a lock makes the check and
    the start one step, so that the second caller finds the first one's munged instead of starting
    another (which fails on munged's own pid file lock).
    """
    Path("/run/munge").mkdir(parents=True, exist_ok=True)
    with open("/run/lock/hpc-slurm-k8s-munged.lock", "w", encoding="ascii") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if subprocess.run(["munge", "-n"], capture_output=True, check=False).returncode == 0:
            return
        shutil.chown("/run/munge", "munge", "munge")
        subprocess.run(["runuser", "-u", "munge", "--", "/usr/sbin/munged"], check=True)
        _wait(lambda: subprocess.run(["munge", "-n"], capture_output=True, check=False).returncode == 0,
              timeout, "munged to answer")


class SlurmHostCluster:
    """A Slurm cluster whose daemons all run on 127.0.0.1 under ``workdir``."""

    def __init__(self, workdir: str | os.PathLike, nodes: int = 4, port_base: int = 16800,
                 accounting: bool = True, start_slurmd: bool = True, cpus_per_node: int = 2,
                 extra_conf: str = "") -> None:
        self.workdir = Path(workdir).resolve()
        self.nodes = nodes
        self.accounting = accounting
        self.start_slurmd = start_slurmd
        self.cpus_per_node = cpus_per_node
        self.extra_conf = extra_conf
        self.ctld_port = port_base + 17
        self.dbd_port = port_base + 19
        self.db_port = port_base + 6
        # slurmd ports: port_base+200 .. (node i listens on port_base+200+i)
        self.slurmd_port_base = port_base + 200
        self.conf = self.workdir / "etc" / "slurm.conf"
        self.log_dir = self.workdir / "log"

    # ----------------------------------------------------------------------------------- config
    @property
    def node_names(self) -> list[str]:
        return ["n%d" % i for i in range(1, self.nodes + 1)]

    @property
    def env(self) -> dict[str, str]:
        """Environment for Slurm client commands (and Ansible tasks) aimed at this cluster."""
        env = dict(os.environ)
        env["SLURM_CONF"] = str(self.conf)
        return env

    def _write_config(self) -> None:
        for sub in ("etc", "log", "state", "spool", "run", "db"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        for sub in ("log", "state", "spool", "run"):
            shutil.chown(self.workdir / sub, SLURM_USER, SLURM_USER)
        # SlurmUser must traverse the work directory to its state and logs (its parents are the
        # caller's business: keep them traversable, e.g. a directory in /tmp).
        self.workdir.chmod(self.workdir.stat().st_mode | 0o011)
        hostname = socket.gethostname().split(".")[0]
        first, last = self.slurmd_port_base + 1, self.slurmd_port_base + self.nodes
        lines = [
            "ClusterName=itest%d" % self.ctld_port,
            "SlurmctldHost=%s(127.0.0.1)" % hostname,
            "SlurmctldPort=%d" % self.ctld_port,
            "SlurmUser=%s" % SLURM_USER,
            "AuthType=auth/munge",
            "StateSaveLocation=%s" % (self.workdir / "state"),
            "SlurmdSpoolDir=%s" % (self.workdir / "spool" / "%n"),
            "SlurmctldPidFile=%s" % (self.workdir / "run" / "slurmctld.pid"),
            "SlurmdPidFile=%s" % (self.workdir / "run" / "slurmd-%n.pid"),
            "SlurmctldLogFile=%s" % (self.log_dir / "slurmctld.log"),
            "SlurmdLogFile=%s" % (self.log_dir / "slurmd-%n.log"),
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "ReturnToService=2",
            "MpiDefault=none",
            "SlurmdTimeout=30",
            # a job that ignores SIGTERM stays COMPLETING this long: the window a test reads it in, on a loaded machine
            "KillWait=30",
            "MinJobAge=300",
            "TreeWidth=65533",
            "SchedulerParameters=sched_interval=1",
        ]
        if self.accounting:
            lines += [
                "AccountingStorageType=accounting_storage/slurmdbd",
                "AccountingStorageHost=127.0.0.1",
                "AccountingStoragePort=%d" % self.dbd_port,
            ]
        if self.nodes == 1:
            nodelist = "n1"
            ports = str(first)
        else:
            nodelist = "n[1-%d]" % self.nodes
            ports = "[%d-%d]" % (first, last)
        lines += [
            "NodeName=%s NodeAddr=127.0.0.1 Port=%s CPUs=%d RealMemory=1000 State=UNKNOWN"
            % (nodelist, ports, self.cpus_per_node),
            "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        ]
        if self.extra_conf:
            lines.append(self.extra_conf)
        self.conf.write_text("\n".join(lines) + "\n")
        if self.accounting:
            dbd_conf = self.workdir / "etc" / "slurmdbd.conf"
            dbd_conf.write_text("\n".join([
                "AuthType=auth/munge",
                "DbdHost=localhost",
                "DbdAddr=127.0.0.1",
                "DbdPort=%d" % self.dbd_port,
                "SlurmUser=%s" % SLURM_USER,
                "PidFile=%s" % (self.workdir / "run" / "slurmdbd.pid"),
                "LogFile=%s" % (self.log_dir / "slurmdbd.log"),
                "StorageType=accounting_storage/mysql",
                "StorageHost=127.0.0.1",
                "StoragePort=%d" % self.db_port,
                "StorageUser=slurm",
                "StoragePass=itest-only",
                "StorageLoc=slurm_acct_db",
            ]) + "\n")
            shutil.chown(dbd_conf, SLURM_USER, SLURM_USER)
            dbd_conf.chmod(0o600)

    # ---------------------------------------------------------------------------------- daemons
    def _start_mariadb(self) -> None:
        datadir = self.workdir / "db" / "data"
        sock = self.workdir / "db" / "mysqld.sock"
        shutil.chown(self.workdir / "db", "mysql", "mysql")
        if not (datadir / "mysql").exists():
            subprocess.run(["mariadb-install-db", "--user=mysql", "--datadir=%s" % datadir,
                            "--auth-root-authentication-method=socket", "--skip-test-db"],
                           check=True, capture_output=True)
        log = self.log_dir / "mariadb.log"
        with open(log, "ab") as out:
            subprocess.Popen(
                ["mariadbd", "--user=mysql", "--datadir=%s" % datadir, "--socket=%s" % sock,
                 "--port=%d" % self.db_port, "--bind-address=127.0.0.1",
                 "--pid-file=%s" % (self.workdir / "db" / "mariadb.pid"),
                 "--innodb-buffer-pool-size=64M", "--skip-log-bin"],
                stdout=out, stderr=out, start_new_session=True)
        _wait(lambda: _port_open(self.db_port), 60, "MariaDB on port %d" % self.db_port, log=log)
        sql = ("CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'itest-only';"
               "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';")
        subprocess.run(["mariadb", "--socket=%s" % sock, "-e", sql], check=True, capture_output=True)

    def _start(self, argv: list[str], log_name: str) -> None:
        with open(self.log_dir / log_name, "ab") as out:
            subprocess.Popen(argv, stdout=out, stderr=out, env=self.env, start_new_session=True)

    def start(self, timeout: float = 60.0) -> "SlurmHostCluster":
        self._write_config()
        ensure_munged()
        if self.accounting:
            self._start_mariadb()
            # slurmdbd finds slurmdbd.conf beside $SLURM_CONF (22.05 has no -f).
            self._start(["slurmdbd", "-D"], "slurmdbd.out")
            _wait(lambda: _port_open(self.dbd_port), timeout, "slurmdbd", log=self.log_dir / "slurmdbd.log")
        self._start(["slurmctld", "-D", "-i", "-f", str(self.conf)], "slurmctld.out")
        _wait(self.ping, timeout, "slurmctld to answer scontrol ping", log=self.log_dir / "slurmctld.log")
        if self.start_slurmd:
            for node in self.node_names:
                self.start_slurmd_node(node)
            self.wait_nodes_idle(self.node_names, timeout)
        return self

    def start_slurmd_node(self, node: str) -> None:
        (self.workdir / "spool" / node).mkdir(parents=True, exist_ok=True)
        self._start(["slurmd", "-D", "-N", node, "-f", str(self.conf)], "slurmd-%s.out" % node)

    def ping(self) -> bool:
        result = self.run(["scontrol", "ping"], check=False)
        return result.returncode == 0 and "UP" in result.stdout

    def start_slurmctld(self, timeout: float = 60.0) -> None:
        self._start(["slurmctld", "-D", "-f", str(self.conf)], "slurmctld.out")
        _wait(self.ping, timeout, "slurmctld to answer scontrol ping", log=self.log_dir / "slurmctld.log")

    def stop_slurmctld(self) -> None:
        self._kill_pidfile(self.workdir / "run" / "slurmctld.pid", signal.SIGTERM)

    def _kill_pidfile(self, pidfile: Path, sig: int, timeout: float = 20.0) -> None:
        """Stop a daemon; one that ignores `sig` for `timeout` seconds is killed."""
        if not pidfile.exists():
            return
        try:
            pid = int(pidfile.read_text().strip())
            os.kill(pid, sig)
        except (OSError, ValueError):
            return
        # the process, not its pidfile: slurmctld removes the pidfile early in its shutdown, while it still
        # accepts connections (a command then reached a controller that was going away)
        try:
            _wait(lambda: not _process_running(pid), timeout, "%s to exit" % pidfile.name)
        except SlurmHostError:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def stop(self) -> None:
        run = self.workdir / "run"
        for node in self.node_names:
            self._kill_pidfile(run / ("slurmd-%s.pid" % node), signal.SIGTERM)
        self._kill_pidfile(run / "slurmctld.pid", signal.SIGTERM)
        self._kill_pidfile(run / "slurmdbd.pid", signal.SIGTERM)
        self._kill_pidfile(self.workdir / "db" / "mariadb.pid", signal.SIGTERM, timeout=60)

    # ---------------------------------------------------------------------------------- helpers
    def run(self, argv: list[str], check: bool = True, user: str | None = None) -> subprocess.CompletedProcess:
        if user:
            argv = ["runuser", "-u", user, "--", *argv]
        return subprocess.run(argv, capture_output=True, text=True, env=self.env, check=check)

    def node_states(self) -> dict[str, str]:
        out = self.run(["sinfo", "-h", "-N", "-o", "%N %T"]).stdout
        return dict(line.split() for line in out.splitlines() if line.strip())

    def wait_nodes_idle(self, nodes: list[str], timeout: float = 60.0) -> None:
        def all_idle():
            states = self.node_states()
            return all(states.get(n) == "idle" for n in nodes)
        _wait(all_idle, timeout, "nodes %s to be idle (now: %s)" % (",".join(nodes), "see sinfo"),
              log=self.log_dir / "slurmctld.log", interval=0.3)

    def reset_nodes(self) -> None:
        """Cancel every job and return every node to service, so each test starts from idle nodes."""
        self.run(["scancel", "--full", "--signal=KILL", "--user=root"], check=False)
        for user in ("nobody",):
            self.run(["scancel", "--signal=KILL", "--user=%s" % user], check=False)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if not self.run(["squeue", "-h", "-t", "all", "-o", "%i %T"]).stdout.strip() or \
                    all(s in ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT")
                        for s in (line.split()[1] for line in self.run(["squeue", "-h", "-t", "all", "-o", "%i %T"]).stdout.splitlines())):
                break
            time.sleep(0.3)
        states = self.node_states()
        busy = [n for n, s in states.items() if s not in ("idle",)]
        if busy:
            self.run(["scontrol", "update", "nodename=%s" % ",".join(busy), "state=resume"], check=False)
        self.wait_nodes_idle(self.node_names)


class ModuleRunner:
    """Runs one of our modules through `ansible localhost -m`, as a user's playbook would."""

    def __init__(self, cluster):
        self.cluster = cluster

    def __call__(self, module, args, check=False, diff=False):
        argv = ["ansible", "localhost", "-m", "hpc.slurm_k8s.%s" % module]
        if args:
            argv += ["-a", json.dumps(args)]
        if check:
            argv.append("--check")
        if diff:
            argv.append("--diff")
        # The minimal callback prints `localhost | CHANGED => {json}` (FAILED! for failures).
        env = dict(self.cluster.env, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.minimal",
                   ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        marker = proc.stdout.find("localhost | ")
        start = proc.stdout.find("=> ", marker) + 3 if marker >= 0 else -1
        try:
            result = json.JSONDecoder().raw_decode(proc.stdout[start:])[0]
        except ValueError:
            raise AssertionError("ansible printed no result (rc=%s):\n%s\n%s" % (proc.returncode, proc.stdout, proc.stderr))
        status = proc.stdout[marker + len("localhost | "):start].split()[0]
        result["failed"] = status in ("FAILED!", "UNREACHABLE!")
        assert result["failed"] == (proc.returncode != 0), (status, proc.returncode)
        return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="action", required=True)
    up = sub.add_parser("up")
    up.add_argument("workdir")
    up.add_argument("--nodes", type=int, default=4)
    up.add_argument("--port-base", type=int, default=16800)
    up.add_argument("--no-slurmd", action="store_true")
    up.add_argument("--no-accounting", action="store_true")
    down = sub.add_parser("down")
    down.add_argument("workdir")
    down.add_argument("--nodes", type=int, default=4)
    down.add_argument("--port-base", type=int, default=16800)
    args = parser.parse_args(argv)
    if pwd.getpwuid(os.getuid()).pw_name != "root":
        print("slurmhost: must run as root (slurmd and mariadbd are started directly)", file=sys.stderr)
        return 1
    cluster = SlurmHostCluster(args.workdir, nodes=args.nodes, port_base=args.port_base,
                               accounting=not getattr(args, "no_accounting", False),
                               start_slurmd=not getattr(args, "no_slurmd", False))
    if args.action == "up":
        started = time.monotonic()
        cluster.start()
        print("slurmhost: up in %.1f s; export SLURM_CONF=%s" % (time.monotonic() - started, cluster.conf))
    else:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
