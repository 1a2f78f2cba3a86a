"""Invalid variables fail before anything is applied, with a message that names the variable.

Each case runs site.yml in render mode over the defaults value set plus the invalid variables
(runs started by conftest.Runs, concurrently); the render directory must stay empty.
"""

from __future__ import annotations

import re

import pytest

# (id, variables, the variable the failure message must name). Every run costs ~5 s of CPU:
# the cases cover each kind of check (hpc.slurm_k8s.check_inputs: types and choices, ranges, names,
# quantities, hostlists, file grammars, unknown names; preflight: cross-variable rules) rather than
# every variable (tests/unit/plugins/plugin_utils/test_inputs.py covers every variable).
CASES = [
    ("replicas-wrong-type", {"slurmd_replicas": "two"}, "slurmd_replicas"),
    ("replicas-negative", {"slurmd_replicas": -1}, "slurmd_replicas"),
    ("storage-mode-unknown", {"storage_mode": "ceph"}, "storage_mode"),
    ("partition-bad-hostlist", {"config_partitions": [{"PartitionName": "debug", "Nodes": "slurmd-[0-3"}]},
     "config_partitions"),
    ("external-db-no-password", {"database_mode": "external", "database_external_host": "db.example.org"},
     "database_external_password"),
    # the Secret is read in the preflight (here from the empty render directory), before anything is written
    ("external-db-secret-missing", {"database_mode": "external", "database_external_host": "db.example.org",
                                    "database_external_password_secret": {"name": "site-db", "key": "password"}},
     "database_external_password_secret: there is no Secret site-db in the render directory"),
    ("login-node-port-out-of-range", {"login_service_type": "NodePort", "login_node_port": 80}, "login_node_port"),
    ("slurmrestd-port-clash", {"cluster_slurmrestd_enabled": True, "slurmrestd_service_type": "NodePort",
                               "slurmrestd_node_port": 30022, "login_service_type": "NodePort", "login_node_port": 30022},
     "slurmrestd_node_port: must differ from login_node_port (30022)"),
    ("slurmrestd-token-lifespan-zero", {"slurmrestd_token_lifespan": 0},
     "slurmrestd_token_lifespan: must be within 1-"),
    ("cluster-name-empty", {"cluster_name": ""}, "cluster_name"),
    ("namespace-invalid", {"cluster_namespace": "HPC.ns"}, "cluster_namespace"),
    ("slurmd-memory-wrong-type", {"slurmd_memory_mib": "1G"}, "slurmd_memory_mib"),
    ("resources-bad-memory", {"slurmctld_resources": {"requests": {"memory": "2GB"}}}, "slurmctld_resources"),
    ("host-network-not-bool", {"slurmd_host_network": "maybe"}, "slurmd_host_network"),
    ("munge-key-too-short", {"secrets_munge_key_length": 8}, "secrets_munge_key_length"),
    ("auth-type-unknown", {"cluster_auth_type": "kerberos"}, "cluster_auth_type"),
    ("auth-type-in-slurm-conf", {"config_slurm_conf": {"AuthType": "auth/none"}},
     "comes from cluster_auth_type (munge or slurm), one setting for every daemon"),
    # MetricsType only through cluster_metrics_enabled, whose check of every image's Slurm version an override
    # would bypass (24.11's daemons and commands stop at the key)
    ("metrics-type-in-slurm-conf", {"config_slurm_conf": {"MetricsType": "metrics/openmetrics"}},
     "config_slurm_conf key 'MetricsType': comes from cluster_metrics_enabled"),
    ("metrics-scrape-interval-invalid", {"cluster_metrics_enabled": True, "slurmctld_metrics_scrape_interval": "30 s"},
     "slurmctld_metrics_scrape_interval"),
    ("metrics-path-unknown", {"cluster_metrics_enabled": True, "slurmctld_metrics_paths": ["jobs", "users"]},
     "slurmctld_metrics_paths"),
    ("auth-key-as-extra-file", {"config_extra_files": {"slurm.jwks": '{"keys": []}'}},
     "is auth/slurm's key, never in a ConfigMap"),
    ("auth-rotation-with-munge", {"secrets_rotation": {"auth": "2026-12"}},
     "auth only with cluster_auth_type slurm: with munge, rotate the munge key"),
    ("powersave-group-count-zero", {"powersave_groups": [{"name": "burst", "count": 0}]}, "powersave_groups"),
    # each check of a group stands alone (a memory check once ran inside the cpu_request one and was skipped)
    ("powersave-group-memory-too-small", {"powersave_groups": [{"name": "burst", "count": 1, "memory_mib": 128}]},
     "powersave_groups"),
    ("powersave-cpu-request-above-cpus",
     {"powersave_groups": [{"name": "burst", "count": 1, "cpus": 1, "cpu_request": "1500m"}]}, "powersave_groups"),
    # Nodes=ALL would put the burst nodes in the default partition too
    ("powersave-partition-all", {"powersave_groups": [{"name": "burst", "count": 2}],
                                 "config_partitions": [{"PartitionName": "compute", "Nodes": "ALL", "Default": True}]},
     "config_partitions"),
    # line injection into the files we write (issue: hostile and careless input)
    ("slurm-conf-line-injection", {"config_slurm_conf": {"SlurmctldDebug": "info\nSlurmUser=root\nPrologSlurmctld=/tmp/x"}},
     "config_slurm_conf['SlurmctldDebug']: must not contain a line break"),
    ("node-line-injection", {"config_partitions": [{"PartitionName": "compute", "Nodes": "ALL", "Default": True,
                                                    "MaxTime": "INFINITE AllowAccounts=root"}]},
     "config_partitions[0]['MaxTime']: must not contain a space"),
    ("authorized-keys-second-key", {"config_users": [{"name": "alice", "uid": 2000, "authorized_keys": [
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIO5Y9dbXOf0Xjwv1kYBWiN6Cz6/MYqPWzPfgN7c8FxQO a\n"
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIO5Y9dbXOf0Xjwv1kYBWiN6Cz6/MYqPWzPfgN7c8FxQO mallory"]}]},
     "config_users[0].authorized_keys[0]: must not contain a line break"),
    ("users-file-injection", {"config_users": [{"name": "alice", "uid": 2000, "shell": "/bin/bash\nroot:0:0:/bin/sh"}]},
     "config_users[0].shell"),
    ("slurmdbd-conf-injection", {"slurmdbd_conf": {"DebugLevel": "info\nStoragePass=x"}},
     "slurmdbd_conf['DebugLevel']: must not contain a line break"),
    # Slurm's own parameter table (plugins/plugin_utils/slurm_parameters.json), judged before anything is written
    ("slurm-conf-below-slurms-minimum", {"config_slurm_conf": {"SchedulerTimeSlice": 0}},
     "config_slurm_conf['SchedulerTimeSlice']: Slurm 24.11 to 26.05 accept an integer from 5 to 65533 here, got 0"),
    ("slurm-conf-key-typo", {"config_slurm_conf": {"KilWait": 30}},
     "config_slurm_conf key 'KilWait': is not a slurm.conf parameter of Slurm 22.05 to 26.05; did you mean KillWait?"),
    ("slurmdbd-conf-old-name", {"slurmdbd_conf": {"PurgeJobMonths": 12}}, "use PurgeJobAfter"),
    ("gres-conf-unknown-key", {"config_extra_files": {"gres.conf": "Name=gpu Count=1 Flie=/dev/null\n"}},
     "config_extra_files['gres.conf'] line 1 Flie: is not a gres.conf parameter"),
    # values that would break pods later
    ("wait-timeout-negative", {"slurmd_wait_timeout": -5}, "slurmd_wait_timeout: must be within 1-604800 seconds"),
    ("replicas-above-max-node-count", {"slurmd_replicas": 5000},
     "slurmd_replicas: must be at most MaxNodeCount of slurm.conf (1024"),
    ("rollout-policy-unknown", {"slurmd_rollout_policy": "kill"}, "slurmd_rollout_policy"),
    ("rollout-max-unavailable-zero", {"slurmd_rollout_max_unavailable": 0},
     "slurmd_rollout_max_unavailable: must be a count from 1 or a percentage within 1%-100%"),
    ("rollout-max-unavailable-above-replicas", {"slurmd_replicas": 2, "slurmd_rollout_max_unavailable": 3},
     "slurmd_rollout_max_unavailable: must be at most slurmd_replicas (2), got 3"),
    ("rollout-max-unavailable-percent", {"slurmd_rollout_max_unavailable": "150%"}, "slurmd_rollout_max_unavailable"),
    ("rotation-of-an-unknown-secret", {"secrets_rotation": {"slurm": "2026-12"}}, "secrets_rotation"),
    ("rotation-with-a-render-directory", {"secrets_rotation": {"ssh": "2026-12"}},
     "secrets_rotation: the Kubernetes API backend is needed"),
    ("storage-class-invalid", {"storage_class": "Fast_SSD"}, "storage_class: must be empty or a DNS-1123 subdomain"),
    ("several-problems", {"slurmd_replicas": -1, "storage_class": "A B", "slurmd_wait_timeout": 0}, "storage_class"),
    # accounting references are planned against an empty database before anything is rendered
    ("accounting-unknown-qos", {"config_accounts": [{"name": "physics", "qos": ["normal", "gpu2"]}]},
     "config_accounts[physics].qos: unknown QoS gpu2 (list it in config_qos)"),
    # silent typos
    ("variable-typo", {"slurmd_replica": 3}, "slurmd_replica: is not a variable of any hpc.slurm_k8s role (did you mean slurmd_replicas?"),
]


def failure_text(output: str) -> str:
    """The failed task's message(s): what the user reads."""
    return "\n".join(line for line in output.splitlines() if re.match(r"^(fatal|failed):", line.strip()) or "msg" in line)


@pytest.mark.parametrize("case_id,variables,variable", CASES, ids=[c[0] for c in CASES])
def test_invalid_variables_fail_before_anything_is_applied(runs, case_id, variables, variable):
    run = runs.result("bad/" + case_id)
    assert run.rc != 0, "%s was accepted:\n%s" % (variables, run.output[-3000:])
    written = [str(p) for p in run.render_dir.rglob("*")] if run.render_dir.exists() else []
    assert written == [], "something was rendered before the failure: %s" % written
    message = failure_text(run.output)
    assert variable in message, "the failure does not name %s:\n%s" % (variable, message or run.output[-3000:])
    # failed in the checks, before any role applied anything
    assert "Check every variable of the collection's roles" in run.output \
        or "Check every role before changing anything" in run.output
    # a type error is one line, not the argument spec
    assert "argument_spec_data" not in run.output


def test_every_problem_is_reported_at_once_one_rule_per_line(runs):
    run = runs.result("bad/several-problems")
    assert "3 problems with the variables; nothing was changed:" in run.output, run.output[-3000:]
    lines = re.findall(r"^- (\w+): (.*)$", run.output, re.M)
    assert sorted(name for name, _rule in lines) == ["slurmd_replicas", "slurmd_wait_timeout", "storage_class"]
    assert dict(lines)["slurmd_replicas"] == "must be within 0-65533 nodes (got -1)"
