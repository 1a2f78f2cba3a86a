"""Benchmark: a no-op site.yml with the kubernetes_preload callback (the repository's ansible.cfg) and without it.

Runs on the local Kubernetes of tests/localkube (tier T3), as root, after `make deps`:

    .venv/bin/python benchmarks/controller_preload.py [--rounds 3] [--json out.json]

Deploys one cluster (namespace slurm-preload, the images of tests/k8s/test_cluster.py's tag), then runs
site.yml on it again ROUNDS times each way, alternating: with the repository's ansible.cfg, which enables
hpc.slurm_k8s.kubernetes_preload (the Kubernetes client imported once in ansible-playbook, before it forks a
worker per task), and with a copy of it without that line. Each run must report changed=0. For each run:
wall time and CPU time (user + system of ansible-playbook, its workers and every process they started, as
the kernel accounts them to this process's children). Medians are printed, with the ratios off / on.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("ANSIBLE_COLLECTIONS_PATH", str(ROOT / ".cache" / "collections"))

# pylint: disable=wrong-import-position
from tests.k8s.cluster import SlurmOnKube  # noqa: E402
from tests.support.kube import start_cluster  # noqa: E402
from tests.support.proc import collection_version  # noqa: E402

NAME, PORT = "preload", 30086
ENABLING = "callbacks_enabled = hpc.slurm_k8s.kubernetes_preload\n"


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def converge(deployment, config):
    before = children_cpu()
    _proc, changed, seconds = deployment.playbook("site", env={"ANSIBLE_CONFIG": str(config)})
    assert changed == 0, "a no-op site.yml changed %d" % changed
    return {"seconds": round(seconds, 1), "cpu_s": round(children_cpu() - before, 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    kube = start_cluster()
    with tempfile.TemporaryDirectory(prefix="preload-") as work:
        config = ROOT / "ansible.cfg"
        lines = config.read_text().splitlines(True)
        assert ENABLING in lines, "ansible.cfg does not enable the callback"
        without = Path(work) / "ansible.cfg"
        without.write_text("".join(line for line in lines if line != ENABLING))
        sides = {"on": config, "off": without}
        deployment = SlurmOnKube(kube, Path(work), NAME, "%s-e2e" % collection_version(), PORT)
        try:
            kube.build_and_load_images(deployment.tag)
            kube.delete_namespace(deployment.namespace)
            deployment.site()
            runs = {side: [] for side in sides}
            for _round in range(args.rounds):
                for side, path in sides.items():
                    runs[side].append(converge(deployment, path))
                    print("%-3s %s" % (side, json.dumps(runs[side][-1])), flush=True)
        finally:
            deployment.delete()
    median = {side: {key: statistics.median(run[key] for run in rows) for key in rows[0]} for side, rows in runs.items()}
    print("no-op site.yml, median of %d: wall %.1f s off -> %.1f s on (%.2fx), CPU %.1f s -> %.1f s (%.2fx)" % (
        args.rounds, median["off"]["seconds"], median["on"]["seconds"], median["off"]["seconds"] / median["on"]["seconds"],
        median["off"]["cpu_s"], median["on"]["cpu_s"], median["off"]["cpu_s"] / median["on"]["cpu_s"]))
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": runs, "median": median}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
