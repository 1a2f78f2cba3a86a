"""Benchmark: slurmrestd `GET /slurm/v0.0.42/jobs` with 1,000 jobs in the queue, side by side with
`squeue --json` in the same pod (the login pod), as the same user.

Runs on the local Kubernetes of tests/localkube (tier T3), as root, after `make deps`:

    .venv/bin/python benchmarks/slurmrestd_latency.py [--jobs 1000] [--rounds 50] [--json results.json]

It deploys a cluster with cluster_slurmrestd_enabled (one worker) into namespace slurm-restbench,
submits --jobs held jobs as alice (one sbatch each, so the queue holds that many job records), then
in the login pod alternates, --rounds times each: a GET of the jobs through the slurmrestd Service
with alice's token (connection, JSON of every job, parsing), and `squeue --json` as alice (a new
process each time, its JSON parsed). Both return every job of the queue.

  rest_p50_s, rest_p99_s      slurmrestd GET jobs
  squeue_p50_s, squeue_p99_s  squeue --json
  ratio_p50                   rest_p50_s / squeue_p50_s
  restd_rss_mb                slurmrestd's resident memory after the rounds (ps in its pod)
  restd_restarts              restarts of the slurmrestd container during the run (target: 0)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.k8s.cluster import SlurmOnKube  # noqa: E402
from tests.support.kube import start_cluster  # noqa: E402
from tests.support.proc import collection_version  # noqa: E402
from tests.support.stats import percentile  # noqa: E402

# Runs in the login pod: alternate the two ways, so that both see the same load and queue.
MEASURE = r"""
import json, os, subprocess, sys, time, urllib.request
token, rounds, expected = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def rest():
    request = urllib.request.Request("http://slurmrestd:6820/slurm/v0.0.42/jobs",
                                     headers={"X-SLURM-USER-TOKEN": token, "X-SLURM-USER-NAME": "alice"})
    with urllib.request.urlopen(request, timeout=120) as response:
        return len(json.loads(response.read())["jobs"])
def squeue():
    out = subprocess.run(["runuser", "-u", "alice", "--", "squeue", "--json"], check=True, capture_output=True).stdout
    return len(json.loads(out)["jobs"])
times = {"rest": [], "squeue": []}
for _ in range(rounds):
    for name, call in (("rest", rest), ("squeue", squeue)):
        started = time.monotonic()
        count = call()
        times[name].append(time.monotonic() - started)
        assert count >= expected, (name, count)
print(json.dumps(times))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep the namespace afterwards")
    args = parser.parse_args()
    tag = collection_version()
    kube = start_cluster()
    kube.build_and_load_images(tag)
    with tempfile.TemporaryDirectory(prefix="bench-restd-") as tmp:
        cluster = SlurmOnKube(kube, Path(tmp), "restbench", tag, 30083, slurmd_replicas=1,
                              cluster_slurmrestd_enabled=True)
        kube.delete_namespace(cluster.namespace)
        cluster.site()
        cluster.wait_for_login()
        cluster.ssh("for i in $(seq %d); do sbatch --hold -o /dev/null --wrap true >/dev/null || exit 1; done"
                    % args.jobs, timeout=1800)
        token = cluster.ssh("scontrol token lifespan=3600").stdout.strip().split("=", 1)[1]
        login = next(name for name in kube.pods(cluster.namespace) if name.startswith("login-"))
        out = kube.exec(cluster.namespace, login, "python3", "-c", MEASURE, token, str(args.rounds), str(args.jobs),
                        timeout=3600).stdout
        times = json.loads(out)
        figures = {"jobs": args.jobs, "rounds": args.rounds}
        for name in ("rest", "squeue"):
            figures["%s_p50_s" % name] = round(percentile(times[name], 0.50), 3)
            figures["%s_p99_s" % name] = round(percentile(times[name], 0.99), 3)
        figures["ratio_p50"] = round(figures["rest_p50_s"] / figures["squeue_p50_s"], 2)
        restd = next(pod for name, pod in kube.pods(cluster.namespace).items() if name.startswith("slurmrestd-"))
        rss = kube.exec(cluster.namespace, restd["metadata"]["name"], "ps", "-o", "rss=", "-C", "slurmrestd").stdout
        figures["restd_rss_mb"] = round(int(rss.split()[0]) / 1024)
        figures["restd_restarts"] = restd["status"]["containerStatuses"][0]["restartCount"]
        if not args.keep:
            cluster.delete()
    print(json.dumps(figures, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
