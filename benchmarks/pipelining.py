"""Benchmark: the playbooks with module pipelining off and on, side by side on one cluster.

Runs on the local Kubernetes of tests/localkube (tier T3), as root, after `make deps`. Deploys one
cluster (namespace slurm-pipe, the images of tests/k8s/test_cluster.py's tag), then, ROUNDS times,
with ANSIBLE_PIPELINING=0 and then =1 (the environment overrides ansible.cfg and the connection
defaults of the slurmctld and slurmdbd pods, which turn it on):

    .venv/bin/python benchmarks/pipelining.py [--rounds 1] [--json out.json]

  site     a no-op site.yml (changed=0)
  noop     a no-op upgrade.yml (the plan finds nothing: no node drained)
  config   upgrade.yml with one slurm.conf value changed (drain, reconfigure, verify, resume)

Without pipelining a module costs three or four commands on its host (a temporary directory, the
copy, the run, the removal), each a `kubectl exec` for the slurmctld pod; with it, one. Medians of the
wall times are printed, with the ratio off / on.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("ANSIBLE_COLLECTIONS_PATH", str(ROOT / ".cache" / "collections"))

# pylint: disable=wrong-import-position
from tests.k8s.cluster import SlurmOnKube  # noqa: E402
from tests.support.proc import collection_version  # noqa: E402
from tests.support.kube import start_cluster  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=1, help="runs of each kind per setting (default 1)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    kube = start_cluster()
    tag = "%s-e2e" % collection_version()
    kube.build_and_load_images(tag)
    deployment = SlurmOnKube(kube, Path(tempfile.mkdtemp(prefix="pipelining-")), "pipe", tag, 30077)
    kube.delete_namespace(deployment.namespace)
    seconds = {}
    max_job_count = 30000
    try:
        deployment.site()
        deployment.wait_nodes({"slurmd-0": "idle", "slurmd-1": "idle"}, 90)
        for _round in range(args.rounds):
            for setting in ("0", "1"):
                env = {"ANSIBLE_PIPELINING": setting}
                for kind in ("site", "noop", "config"):
                    if kind == "config":
                        max_job_count += 1
                        deployment.save(config_slurm_conf={"MaxJobCount": max_job_count})
                    _proc, changed, took = deployment.playbook("site" if kind == "site" else "upgrade", env=env)
                    assert kind != "site" or changed == 0, (kind, changed)
                    seconds.setdefault("%s_pipelining_%s_s" % (kind, "on" if setting == "1" else "off"), []).append(
                        round(took, 1))
    finally:
        deployment.delete()
    summary = dict(seconds, load_average=os.getloadavg()[0])
    for kind in ("site", "noop", "config"):
        off, on = (statistics.median(seconds["%s_pipelining_%s_s" % (kind, s)]) for s in ("off", "on"))
        summary["%s_off_over_on" % kind] = round(off / on, 2)
    print(json.dumps(summary, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
