# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tier T2: slurm_accounting against real Slurm 22.05 slurmctld + slurmdbd + MariaDB on this host.

The database is read back with sacctmgr itself, not with the module, so a module that reports what it
did not do fails here."""

from __future__ import annotations

from test_modules_on_slurm import job_state, wait_for

QOS = [
    {"name": "T2Debug", "priority": 50, "max_wall": "00:30:00", "max_jobs_per_user": 1, "flags": ["DenyOnLimit"]},
    {"name": "t2gpu", "priority": 100, "grp_tres": {"cpu": 8, "mem": "4G"}, "max_tres_per_user": "cpu=4"},
]
ACCOUNTS = [
    {"name": "T2Physics", "description": "Physics Department", "fairshare": 60,
     "qos": ["normal", "t2debug", "t2gpu"], "default_qos": "normal"},
    {"name": "t2theory", "parent": "t2physics", "description": "Theory group"},
]
USERS = [
    {"name": "t2alice", "default_account": "t2physics"},
    {"name": "t2bob", "default_account": "t2theory", "admin_level": "operator",
     "associations": [{"account": "t2physics", "partition": "debug"}]},
]


def sacctmgr(cluster, *what):
    """Rows of `sacctmgr --parsable2 --noheader show ...`, as a set (row order is not part of the contract)."""
    out = cluster.run(["sacctmgr", "--parsable2", "--noheader", "show", *what]).stdout
    return set(line for line in out.splitlines() if line.strip())


def snapshot(cluster):
    return dict(
        qos=sacctmgr(cluster, "qos", "format=name,priority,grptres,maxtrespu,maxjobspu,maxwall,flags,description"),
        accounts=sacctmgr(cluster, "association", "format=account,user,partition,parentname,share,qos,defaultqos"),
        users=sacctmgr(cluster, "user", "format=user,defaultaccount,adminlevel"),
    )


def test_create_check_mode_noop_one_limit_and_purge_off(cluster, run_module):
    args = {"qos": QOS, "accounts": ACCOUNTS, "users": USERS}
    before = snapshot(cluster)
    planned = run_module("slurm_accounting", args, check=True, diff=True)
    assert planned["changed"] is True and planned["failed"] is False, planned
    assert snapshot(cluster) == before, "check mode changed the database"
    assert sorted(planned["changes"]["accounts"]) == ["t2physics", "t2theory"]

    applied = run_module("slurm_accounting", args)
    assert applied["changed"] is True and applied["failed"] is False, applied
    assert applied["commands"] == planned["commands"], "check mode planned other commands than were run"
    after = snapshot(cluster)
    assert {"t2debug|50|||1|00:30:00|DenyOnLimit|t2debug", "t2gpu|100|cpu=8,mem=4G|cpu=4||||t2gpu"} <= after["qos"]
    assert {"t2physics|||root|60|normal,t2debug,t2gpu|normal", "t2theory|||t2physics|1|normal,t2debug,t2gpu|normal",
            "t2physics|t2alice|||1|normal,t2debug,t2gpu|normal",
            "t2physics|t2bob|debug||1|normal,t2debug,t2gpu|normal",
            "t2theory|t2bob|||1|normal,t2debug,t2gpu|normal"} <= after["accounts"]
    assert {"t2alice|t2physics|None", "t2bob|t2theory|Operator"} <= after["users"]

    second = run_module("slurm_accounting", args)
    assert second["changed"] is False and second["commands"] == [], second
    assert second["msg"] == "accounting already as listed"

    # one limit: one modify call, and only that value moves
    one = dict(QOS[0], max_jobs_per_user=2)
    changed = run_module("slurm_accounting", {"qos": [one, QOS[1]], "accounts": ACCOUNTS, "users": USERS}, diff=True)
    assert changed["commands"] == [["sacctmgr", "-i", "modify", "qos", "where", "name=t2debug", "set", "MaxJobsPerUser=2"]]
    assert changed["changes"]["qos"] == {"t2debug": {"action": "modify", "before": {"max_jobs_per_user": "1"},
                                                     "after": {"max_jobs_per_user": "2"}}}
    moved = snapshot(cluster)
    assert moved["qos"] - after["qos"] == {"t2debug|50|||2|00:30:00|DenyOnLimit|t2debug"}
    assert after["qos"] - moved["qos"] == {"t2debug|50|||1|00:30:00|DenyOnLimit|t2debug"}
    assert (moved["accounts"], moved["users"]) == (after["accounts"], after["users"])

    # purge off (the default) keeps what is not listed; purge on would remove it (check mode only)
    cluster.run(["sacctmgr", "-i", "add", "account", "t2outsider", "cluster=%s" % applied["cluster"]])
    kept = run_module("slurm_accounting", {"accounts": ACCOUNTS[:1]})
    assert kept["changed"] is False
    assert any(row.startswith("t2outsider|") for row in snapshot(cluster)["accounts"])
    purge = run_module("slurm_accounting", dict(args, purge=True), check=True)
    assert purge["failed"] is False, purge["msg"]
    assert purge["changes"]["accounts"]["t2outsider"]["action"] == "remove", purge
    assert "root" not in purge["changes"]["accounts"] and "normal" not in purge["changes"]["qos"]
    assert any(row.startswith("t2outsider|") for row in snapshot(cluster)["accounts"]), "purge in check mode removed it"


def test_removing_an_account_with_a_running_job_is_refused(cluster, run_module):
    # root may use the account (without the association, slurmctld would run the job under root's
    # default account instead)
    args = {"accounts": [{"name": "t2busy", "description": "busy project"}],
            "users": [{"name": "root", "default_account": "root", "associations": [{"account": "t2busy"}]}]}
    assert run_module("slurm_accounting", args)["changed"] is True
    job = cluster.run(["sbatch", "--parsable", "-A", "t2busy", "-w", "n3", "-o", "/dev/null", "--chdir=/tmp",
                       "--wrap", "sleep 300"]).stdout.strip()
    wait_for(lambda: job_state(cluster, job) == "RUNNING", 20, "job %s to run" % job)
    assert cluster.run(["squeue", "-h", "-j", job, "-o", "%a"]).stdout.strip() == "t2busy"
    before = snapshot(cluster)
    refused = run_module("slurm_accounting", {"accounts": [{"name": "t2busy", "state": "absent"}]})
    assert refused["failed"] is True and refused["changed"] is False, refused
    assert "refusing to remove what 1 active job(s) use: %s (running, root)" % job in refused["msg"]
    assert [j["job_id"] for j in refused["blocking_jobs"]] == [job]
    assert snapshot(cluster) == before, "a refused removal changed the database"
    assert job_state(cluster, job) == "RUNNING"

    cluster.run(["scancel", job])
    wait_for(lambda: job_state(cluster, job) in ("CANCELLED", "GONE"), 30, "job %s to end" % job)
    removed = run_module("slurm_accounting", {"accounts": [{"name": "t2busy", "state": "absent"}]})
    assert removed["changed"] is True and removed["failed"] is False, removed
    assert not any(row.startswith("t2busy|") for row in snapshot(cluster)["accounts"])


def test_bad_input_names_the_entry_and_changes_nothing(cluster, run_module):
    before = snapshot(cluster)
    cases = [
        ({"qos": [{"name": "t2bad", "grp_tres": "gres/gpu=8"}]}, "qos[t2bad].grp_tres: unknown TRES gres/gpu"),
        ({"accounts": [{"name": "t2c1", "parent": "t2c2"}, {"name": "t2c2", "parent": "t2c1"}]},
         "accounts[t2c1].parent: the parents form a cycle (t2c1 -> t2c2 -> t2c1)"),
        ({"users": [{"name": "t2carol", "default_account": "t2nowhere"}]},
         "users[t2carol]: account t2nowhere does not exist"),
        ({"accounts": [{"name": "t2new", "qos": ["normal", "t2nosuchqos"]}]},
         "accounts[t2new].qos: unknown QoS t2nosuchqos"),
        ({"qos": [{"name": "t2bad", "flags": ["DenyOnLimit", "Sometimes"]}]}, "unknown QoS flag(s) sometimes"),
    ]
    for args, message in cases:
        result = run_module("slurm_accounting", args)
        assert result["failed"] is True and message in result["msg"], (args, result["msg"])
    assert snapshot(cluster) == before, "refused input changed the database"
