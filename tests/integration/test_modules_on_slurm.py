# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tier T2: slurm_node, slurm_node_info and slurm_job_info against real Slurm 22.05 daemons."""

from __future__ import annotations

import re

from tests.support.proc import wait_for  # (conftest's slurmhost import put the repository on sys.path)

TAG = "hpc.slurm_k8s:upgrade"


def submit(cluster, node, script="sleep 300", user=None):
    out = cluster.run(["sbatch", "--parsable", "-w", node, "-o", "/dev/null", "--chdir=/tmp", "--wrap", script],
                      user=user).stdout
    job_id = out.strip().split(";")[0]
    wait_for(lambda: job_state(cluster, job_id) == "RUNNING", 20, "job %s to run" % job_id)
    return job_id


def job_state(cluster, job_id):
    out = cluster.run(["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T"], check=False).stdout.strip()
    return out or "GONE"


def node(cluster, name):
    line = cluster.run(["scontrol", "show", "node", "-o", name]).stdout
    fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
    return fields["State"], (line.split("Reason=", 1)[1].rsplit(" [", 1)[0] if "Reason=" in line else None)


def test_drain_four_step_check_mode_sequence(cluster, run_module):
    args = {"nodes": ["n[1-2]"], "state": "drained", "reason": "four steps", "tag": "upgrade"}
    first_check = run_module("slurm_node", args, check=True, diff=True)
    assert first_check["changed"] is True
    assert first_check["nodes"]["n1"]["after"] == {"state": "IDLE+DRAIN", "reason": TAG + " four steps"}
    assert node(cluster, "n1")[0] == "IDLE", "check mode changed the node"

    applied = run_module("slurm_node", args, diff=True)
    assert applied["changed"] is True and applied["changed_nodes"] == ["n1", "n2"]
    assert node(cluster, "n1") == ("IDLE+DRAIN", TAG + " four steps")

    second_check = run_module("slurm_node", args, check=True)
    assert second_check["changed"] is False and second_check["unchanged_nodes"] == ["n1", "n2"]
    second = run_module("slurm_node", args)
    assert second["changed"] is False
    assert node(cluster, "n3")[0] == "IDLE", "a node outside the hostlist was touched"


def test_drain_while_a_job_runs_goes_draining_then_drained(cluster, run_module):
    job = submit(cluster, "n1", "sleep 20")
    drained = run_module("slurm_node", {"nodes": ["n1"], "state": "drained", "reason": "r"})
    assert drained["nodes"]["n1"]["after"]["state"] in ("MIXED+DRAIN", "ALLOCATED+DRAIN")
    info = run_module("slurm_node_info", {"nodes": ["n1"]})
    assert info["nodes"][0]["drain_state"] == "draining", (info, job_state(cluster, job))
    assert info["nodes"][0]["jobs"] == [job]

    waited = run_module("slurm_node", {"nodes": ["n1"], "state": "drained", "reason": "r", "wait": True,
                                       "wait_timeout": 60, "wait_interval": 0.5})
    assert waited["failed"] is False and waited["changed"] is False
    assert waited["waited"] > 0
    assert node(cluster, "n1")[0] == "IDLE+DRAIN"
    assert job_state(cluster, job) in ("COMPLETED", "GONE"), "the drain killed the job"


def test_resume_returns_our_nodes_and_leaves_admin_drained_ones(cluster, run_module):
    cluster.run(["scontrol", "update", "nodename=n2", "state=drain", "reason=bad disk"])
    run_module("slurm_node", {"nodes": ["ALL"], "state": "drained", "reason": "upgrade", "tag": "upgrade"})
    resumed = run_module("slurm_node", {"nodes": ["ALL"], "state": "resumed", "tag": "upgrade"}, diff=True)
    assert resumed["changed"] is True
    assert resumed["changed_nodes"] == ["n1", "n3", "n4"]
    assert "bad disk" in resumed["skipped_nodes"]["n2"]
    assert node(cluster, "n2") == ("IDLE+DRAIN", "bad disk")
    cluster.wait_nodes_idle(["n1", "n3", "n4"], 30)

    again = run_module("slurm_node", {"nodes": ["ALL"], "state": "resumed", "tag": "upgrade"})
    assert again["changed"] is False and list(again["skipped_nodes"]) == ["n2"]

    forced = run_module("slurm_node", {"nodes": ["n2"], "state": "resumed", "force": True})
    assert forced["changed"] is True
    assert node(cluster, "n2")[1] is None


def test_resume_does_not_take_nodes_drained_for_another_purpose(cluster, run_module):
    run_module("slurm_node", {"nodes": ["n3"], "state": "drained", "reason": "shrink", "tag": "scale"})
    resumed = run_module("slurm_node", {"nodes": ["n3"], "state": "resumed", "tag": "upgrade"})
    assert resumed["changed"] is False
    assert node(cluster, "n3") == ("IDLE+DRAIN", "hpc.slurm_k8s:scale shrink")


def test_down_refuses_a_node_with_a_job_and_resume_brings_ours_back(cluster, run_module):
    job = submit(cluster, "n4")
    result = run_module("slurm_node", {"nodes": ["n[3-4]"], "state": "down", "reason": "hw"})
    assert result["changed_nodes"] == ["n3"]
    assert "jobs are running" in result["skipped_nodes"]["n4"]
    assert job_state(cluster, job) == "RUNNING"
    assert node(cluster, "n3")[0].startswith("DOWN")
    back = run_module("slurm_node", {"nodes": ["n3"], "state": "resumed"})
    assert back["changed"] is True
    cluster.wait_nodes_idle(["n3"], 30)


def test_completing_job_counts_as_active_until_it_is_gone(cluster, run_module):
    # The batch shell ignores SIGTERM, so after scancel the job stays COMPLETING until KillWait (30 s)
    # ends with SIGKILL: a restart in that window could lose its end record. scancel only once the shell
    # has set its trap (the marker file): Slurm says RUNNING before slurmstepd has started the script, and
    # a SIGTERM that comes first ends the job at once (CI saw it CANCELLED, never COMPLETING, under load).
    marker = cluster.workdir / "completing-job-trap-set"
    marker.unlink(missing_ok=True)
    job = submit(cluster, "n2", "trap '' TERM; touch %s; while true; do sleep 1; done" % marker)
    wait_for(marker.exists, 60, "job %s to set its trap (%s)" % (job, marker))
    cluster.run(["scancel", job])
    wait_for(lambda: job_state(cluster, job) == "COMPLETING", 20, "job %s to be COMPLETING" % job)
    queue = run_module("slurm_job_info", {})
    assert [j["job_id"] for j in queue.get("active_jobs", [])] == [job], queue
    assert queue["active_jobs"][0]["state"] == "completing"
    info = run_module("slurm_node_info", {"nodes": ["n2"]})
    assert "completing" in info["nodes"][0]["flags"] and info["nodes"][0]["jobs"] == [job]

    waited = run_module("slurm_job_info", {"wait": True, "wait_timeout": 60, "wait_interval": 0.5})
    assert waited["failed"] is False and waited["active_count"] == 0
    assert job_state(cluster, job) == "CANCELLED", "the wait returned while the job was still completing"


def test_queue_wait_timeout_names_the_active_jobs(cluster, run_module):
    job = submit(cluster, "n1", "sleep 300")
    result = run_module("slurm_job_info", {"wait": True, "wait_timeout": 2, "wait_interval": 0.5})
    assert result["failed"] is True
    assert "%s (running, root, on n1)" % job in result["msg"]
    assert result["active_count"] == 1


def test_job_filters_and_counts(cluster, run_module):
    mine = submit(cluster, "n1", "sleep 300")
    theirs = submit(cluster, "n2", "sleep 300", user="nobody")
    pending = cluster.run(["sbatch", "--parsable", "-w", "n3", "--begin=now+1hour", "-o", "/dev/null",
                           "--wrap", "true"]).stdout.strip()
    everything = run_module("slurm_job_info", {})
    assert everything["counts"].get("running") == 2 and everything["counts"].get("pending") == 1
    assert everything["active_count"] == 2
    by_user = run_module("slurm_job_info", {"users": ["nobody"], "states": ["running"]})
    assert [j["job_id"] for j in by_user["jobs"]] == [theirs]
    by_node = run_module("slurm_job_info", {"nodes": ["n1"], "states": ["running"]})
    assert [j["job_id"] for j in by_node["jobs"]] == [mine]
    only_pending = run_module("slurm_job_info", {"states": ["pending"], "partitions": ["debug"]})
    assert [j["job_id"] for j in only_pending["jobs"]] == [pending]
    assert only_pending["jobs"][0]["node_names"] == []
    bad_user = run_module("slurm_job_info", {"users": ["no-such-user-here"]})
    assert bad_user["failed"] is True and "Invalid user" in bad_user["msg"]


def test_job_time_limit_time_left_and_end_time_as_slurm_prints_them(cluster, run_module):
    """What upgrade.yml computes its maintenance window from (squeue %l, %L, %e)."""
    limited = cluster.run(["sbatch", "--parsable", "-w", "n1", "-t", "7", "-o", "/dev/null", "--chdir=/tmp",
                           "--wrap", "sleep 300"]).stdout.strip().split(";")[0]
    wait_for(lambda: job_state(cluster, limited) == "RUNNING", 20, "job %s to run" % limited)
    job = run_module("slurm_job_info", {"job_ids": [limited]})["jobs"][0]
    assert job["time_limit"] == "7:00", job
    assert re.match(r"^[0-6]:[0-5][0-9]$", job["time_left"]), job
    assert re.match(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}$", job["end_time"]), job


def test_unknown_node_and_invalid_hostlist_fail_and_change_nothing(cluster, run_module):
    unknown = run_module("slurm_node", {"nodes": ["n[1-6]"], "state": "drained", "reason": "x"})
    assert unknown["failed"] is True
    assert "unknown node(s) n5, n6" in unknown["msg"]
    invalid = run_module("slurm_node", {"nodes": ["n[3-1]"], "state": "drained", "reason": "x"})
    assert invalid["failed"] is True and "Invalid" in invalid["msg"]
    unbalanced = run_module("slurm_node", {"nodes": ["n[1-"], "state": "drained", "reason": "x"})
    assert unbalanced["failed"] is True and "invalid hostlist expression" in unbalanced["msg"]
    assert all(state == "idle" for state in cluster.node_states().values())


def test_controller_down_fails_closed(cluster, run_module):
    submit(cluster, "n1", "sleep 300")
    cluster.stop_slurmctld()
    try:
        queue = run_module("slurm_job_info", {})
        assert queue["failed"] is True and "active_count" not in queue
        assert "Unable to contact slurm controller" in queue["msg"]
        nodes = run_module("slurm_node", {"nodes": ["ALL"], "state": "drained", "reason": "x"})
        assert nodes["failed"] is True and "Unable to contact" in nodes["msg"]
        info = run_module("slurm_node_info", {})
        assert info["failed"] is True
    finally:
        cluster.start_slurmctld()
    assert run_module("slurm_job_info", {})["active_count"] == 1, "the running job did not survive the restart"
