"""Invalid variables fail before anything is applied, with a message that names the variable.

Each case runs site.yml in render mode over the defaults value set plus the invalid variables
(runs started by conftest.Runs, concurrently); the render directory must stay empty.
"""

from __future__ import annotations

import re

import pytest

# (id, variables, the variable the failure message must name). Every run costs ~5 s of CPU:
# the cases cover each kind of check (argument specs: types and choices; preflight: ranges, names,
# quantities, hostlists, cross-variable rules) rather than every variable.
CASES = [
    ("replicas-wrong-type", {"slurmd_replicas": "two"}, "slurmd_replicas"),
    ("replicas-negative", {"slurmd_replicas": -1}, "slurmd_replicas"),
    ("storage-mode-unknown", {"storage_mode": "ceph"}, "storage_mode"),
    ("partition-bad-hostlist", {"config_partitions": [{"PartitionName": "debug", "Nodes": "slurmd-[0-3"}]},
     "config_partitions"),
    ("external-db-no-password", {"database_mode": "external", "database_external_host": "db.example.org"},
     "database_external_password"),
    ("login-node-port-out-of-range", {"login_service_type": "NodePort", "login_node_port": 80}, "login_node_port"),
    ("cluster-name-empty", {"cluster_name": ""}, "cluster_name"),
    ("namespace-invalid", {"cluster_namespace": "HPC.ns"}, "cluster_namespace"),
    ("slurmd-memory-wrong-type", {"slurmd_memory_mib": "1G"}, "slurmd_memory_mib"),
    ("resources-bad-memory", {"slurmctld_resources": {"requests": {"memory": "2GB"}}}, "slurmctld_resources"),
    ("host-network-not-bool", {"slurmd_host_network": "maybe"}, "slurmd_host_network"),
    ("munge-key-too-short", {"secrets_munge_key_length": 8}, "secrets_munge_key_length"),
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
    assert "Check every role before changing anything" in run.output or "Validating arguments" in run.output
