"""Benchmark: converge 1,000 users in 50 accounts with 5 QoS on an empty accounting database.

Side by side, in one run, against two fresh real Slurm 22.05 clusters (slurmctld + slurmdbd + MariaDB
on this host, no slurmd needed), each starting from an empty database:

  module      hpc.slurm_k8s.slurm_accounting, run as Ansible runs a module (a Python process reading
              its arguments from a file): the first converge, then the no-op re-run
  per-entity  what a playbook of shell tasks does: one `sacctmgr -i add ...` per QoS, account and user
              (it has no no-op re-run: a second run makes the same calls, each answering "Nothing new
              added" with rc 1, so the first run's time is its re-run's too)

Both end in the same database (compared as sets of `sacctmgr show association` rows).

Usage (as root, after `make deps`):
    .venv/bin/python benchmarks/accounting.py [--users 1000] [--accounts 50] [--qos 5] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from node_cycle import module_process, run, timed  # noqa: E402  (one copy of the process runner)
from slurmhost import SlurmHostCluster  # noqa: E402  (node_cycle put tests/integration on the path)


def entities(users, accounts, qos):
    qos_list = [{"name": "q%d" % i, "priority": 10 * i, "max_jobs_per_user": i + 1,
                 "max_wall": "%d:00:00" % (i + 1), "max_tres_per_user": "cpu=%d" % (8 * (i + 1))}
                for i in range(qos)]
    account_list = [{"name": "proj%02d" % i, "description": "project %d" % i, "fairshare": 1 + i % 5,
                     "qos": ["normal"] + [q["name"] for q in qos_list], "default_qos": "normal"}
                    for i in range(accounts)]
    user_list = [{"name": "user%04d" % i, "default_account": "proj%02d" % (i % accounts)} for i in range(users)]
    return dict(qos=qos_list, accounts=account_list, users=user_list)


def per_entity_commands(args, cluster_name):
    """One sacctmgr call per entity, as `ansible.builtin.command` tasks in a loop would make."""
    commands = []
    for q in args["qos"]:
        commands.append(["sacctmgr", "-i", "add", "qos", q["name"], "Priority=%d" % q["priority"],
                         "MaxJobsPerUser=%d" % q["max_jobs_per_user"], "MaxWall=%s" % q["max_wall"],
                         "MaxTRESPerUser=%s" % q["max_tres_per_user"]])
    for a in args["accounts"]:
        commands.append(["sacctmgr", "-i", "add", "account", a["name"], "cluster=%s" % cluster_name,
                         "Description=%s" % a["description"], "Fairshare=%d" % a["fairshare"],
                         "QOS=%s" % ",".join(a["qos"]), "DefaultQOS=%s" % a["default_qos"]])
    for u in args["users"]:
        commands.append(["sacctmgr", "-i", "add", "user", u["name"], "cluster=%s" % cluster_name,
                         "account=%s" % u["default_account"], "defaultaccount=%s" % u["default_account"]])
    return commands


def associations(cluster):
    out = cluster.run(["sacctmgr", "--parsable2", "--noheader", "show", "association",
                       "format=account,user,parentname,share,qos,defaultqos"]).stdout
    return set(line for line in out.splitlines() if line.strip())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--accounts", type=int, default=50)
    parser.add_argument("--qos", type=int, default=5)
    parser.add_argument("--json", help="write the figures to this file")
    options = parser.parse_args()
    args = entities(options.users, options.accounts, options.qos)
    figures = dict(users=options.users, accounts=options.accounts, qos=options.qos)

    with tempfile.TemporaryDirectory(prefix="bench-accounting-") as workdir:
        os.chmod(workdir, 0o755)  # slurmctld drops to SlurmUser, which must reach its state dir
        clusters = [SlurmHostCluster(Path(workdir) / name, nodes=1, port_base=base, start_slurmd=False)
                    for name, base in (("module", 19800), ("loop", 20800))]
        for cluster in clusters:
            cluster.start()
        try:
            module_cluster, loop_cluster = clusters
            figures["slurm"] = module_cluster.run(["sacctmgr", "--version"]).stdout.strip()
            env = dict(module_cluster.env, PYTHONPATH=str(ROOT.parent / ".cache" / "collections"))
            seconds, first = timed(lambda: module_process("slurm_accounting", args, env, workdir))
            assert first["changed"] is True, first["msg"]
            figures["module_first_s"] = seconds
            figures["module_first_sacctmgr_writes"] = len(first["commands"])
            seconds, again = timed(lambda: module_process("slurm_accounting", args, env, workdir))
            assert again["changed"] is False and again["commands"] == [], again["msg"]
            figures["module_noop_s"] = seconds

            cluster_name = loop_cluster.run(["sacctmgr", "--parsable2", "--noheader", "show", "cluster",
                                             "format=cluster"]).stdout.strip()
            commands = per_entity_commands(args, cluster_name)
            figures["per_entity_calls"] = len(commands)
            figures["per_entity_s"] = timed(lambda: [run(c, loop_cluster.env) for c in commands])[0]

            # the same database either way (cluster names differ: compare without them)
            if associations(module_cluster) != associations(loop_cluster):
                raise RuntimeError("the module and the per-entity calls built different associations: %s" % sorted(
                    associations(module_cluster) ^ associations(loop_cluster))[:10])
        finally:
            for cluster in clusters:
                cluster.stop()

    figures["speedup_first"] = figures["per_entity_s"] / figures["module_first_s"]
    figures["speedup_noop"] = figures["per_entity_s"] / figures["module_noop_s"]
    print("converge %(users)d users in %(accounts)d accounts with %(qos)d QoS on an empty database (%(slurm)s)" % figures)
    print("  module, first run          %8.2f s  (%d sacctmgr write calls)" % (
        figures["module_first_s"], figures["module_first_sacctmgr_writes"]))
    print("  module, no-op re-run       %8.2f s" % figures["module_noop_s"])
    print("  one sacctmgr per entity    %8.2f s  (%d calls)" % (figures["per_entity_s"], figures["per_entity_calls"]))
    print("  speed-up: first run %.1fx, re-run %.1fx (against the same calls again)" % (
        figures["speedup_first"], figures["speedup_noop"]))
    if options.json:
        Path(options.json).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
