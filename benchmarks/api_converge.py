"""Benchmark: a no-op site.yml through the Kubernetes API, this checkout against a baseline revision.

Runs on the local Kubernetes of tests/localkube (tier T3), as root, after `make deps`. Deploys one
cluster with the checkout (namespace slurm-bench, the images of tests/k8s/test_cluster.py's tag), then
runs site.yml on it again, alternating the baseline and the checkout, ROUNDS times each:

    .venv/bin/python benchmarks/api_converge.py [--base REV] [--rounds 3] [--json out.json]

For each run: wall time, tasks executed (ok in the recap), module runs (forks; as benchmarks/render_speed.py
counts them: hpc.slurm_k8s.k8s_apply runs in the controller and starts a module only to write or wait) and
the write requests the run made to the API server (its audit log, which records writes only; user
kubernetes-admin, this namespace): a no-op must make none. Both revisions converge the same cluster, so
each run must report changed=0. Medians are printed, with the ratio baseline / checkout.

Then one more run of each side counts every call it makes to the API server, on the client side (the
audit policy of tests/localkube logs writes only): a sitecustomize.py on PYTHONPATH wraps urllib3's
PoolManager.urlopen (the kubernetes client's one way out, in ansible-playbook, its workers and every
module process) and logs method and path, and a `kubectl` first on PATH logs each run of kubectl (the
kubectl connection's way into pods) before it starts the real one. These runs are not timed (the hook
imports urllib3 into every Python process).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter as collections_counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("ANSIBLE_COLLECTIONS_PATH", str(ROOT / ".cache" / "collections"))

# pylint: disable=wrong-import-position
from benchmarks.render_speed import CALLBACK, forks  # noqa: E402
from tests.k8s.cluster import SlurmOnKube  # noqa: E402
from tests.support.kube import localkube, start_cluster  # noqa: E402
from tests.support.proc import collection_version  # noqa: E402

# client-side call counting (the counted runs only)
SITECUSTOMIZE = '''
import os


def _count_api_calls():
    out = os.environ.get("API_CALLS_OUT")
    if not out:
        return
    try:
        from urllib3 import poolmanager
    except ImportError:
        return
    urlopen = poolmanager.PoolManager.urlopen

    def counted(self, method, url, *args, **kwargs):
        path = url.split("://", 1)[-1].split("/", 1)[-1].split("?", 1)[0]
        handle = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(handle, ("%s /%s\\n" % (method, path)).encode())
        finally:
            os.close(handle)
        return urlopen(self, method, url, *args, **kwargs)

    poolmanager.PoolManager.urlopen = counted


_count_api_calls()
'''
KUBECTL_SHIM = '''#!/bin/sh
printf '%%s\\n' "$*" >> "$KUBECTL_CALLS_OUT"
exec %s "$@"
'''
RECAP = re.compile(r"localhost\s*:\s*ok=(\d+)\s+changed=(\d+)")
NAME, PORT = "bench", 30084


def writes_since(position, namespace, user="kubernetes-admin"):
    """How many write requests `user` made in `namespace` since the audit log was at `position`."""
    with open(localkube.AUDIT_LOG, "rb") as log:
        log.seek(position)
        events = [json.loads(line) for line in log.read().splitlines() if line.strip()]
    return len([e for e in events if e["user"]["username"] == user and e.get("stage") == "ResponseComplete"
                and (e.get("objectRef", {}).get("namespace") == namespace
                     or (e.get("objectRef", {}).get("resource"), e.get("objectRef", {}).get("name"))
                     == ("namespaces", namespace))])


def converge(deployment, collections, source, work, side, count_calls=False):
    counted = work / ("%s.forks.json" % side)
    env = dict(deployment.kube.env, ANSIBLE_COLLECTIONS_PATH=collections, ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",
               ANSIBLE_CALLBACK_PLUGINS=str(work), ANSIBLE_CALLBACKS_ENABLED="forks", FORKS_OUT=str(counted),
               ANSIBLE_NOCOLOR="1")
    calls, kubectl_calls = work / ("%s.calls" % side), work / ("%s.kubectl" % side)
    if count_calls:
        for path in (calls, kubectl_calls):
            path.write_text("")
        env.update(PYTHONPATH=os.pathsep.join(filter(None, [str(work / "hook"), env.get("PYTHONPATH")])),
                   PATH=str(work / "shim") + os.pathsep + env["PATH"], API_CALLS_OUT=str(calls),
                   KUBECTL_CALLS_OUT=str(kubectl_calls))
    position = localkube.AUDIT_LOG.stat().st_size
    started = time.monotonic()
    proc = subprocess.run([str(Path(sys.executable).with_name("ansible-playbook")), "playbooks/site.yml", "-e",
                           "@%s" % deployment.vars_file], cwd=str(source), env=env, capture_output=True, text=True,
                          check=False)
    seconds = time.monotonic() - started
    recap = RECAP.search(proc.stdout)
    if proc.returncode != 0 or not recap or recap.group(2) != "0":
        raise SystemExit("%s: site.yml did not converge with changed=0:\n%s" % (side, proc.stdout[-3000:]))
    result = {"seconds": round(seconds, 1), "tasks": int(recap.group(1)),
              "forks": forks(json.loads(counted.read_text())), "writes": writes_since(position, deployment.namespace)}
    if count_calls:
        lines = calls.read_text().splitlines()
        methods = collections_counter(line.split(" ", 1)[0] for line in lines)
        result.update(api_calls=sum(methods.values()), api_calls_by_method=dict(sorted(methods.items())),
                      kubectl_runs=len(kubectl_calls.read_text().splitlines()),
                      api_calls_by_path=dict(collections_counter(lines).most_common()),
                      kubectl_commands=kubectl_calls.read_text().splitlines())
    return result


def install_counters(work, env_path):
    """The sitecustomize.py and kubectl shim of the counted runs (module docstring)."""
    real = shutil.which("kubectl", path=env_path)
    if not real:
        raise SystemExit("kubectl is not on PATH (%s)" % env_path)
    (work / "hook").mkdir()
    (work / "hook" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    (work / "shim").mkdir()
    shim = work / "shim" / "kubectl"
    shim.write_text(KUBECTL_SHIM % shlex.quote(real))
    shim.chmod(0o755)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="a65e7fb")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    kube = start_cluster()
    work = Path(tempfile.mkdtemp(prefix="api-converge-"))
    base = work / "base" / "ansible_collections" / "hpc" / "slurm_k8s"
    deployment = SlurmOnKube(kube, work, NAME, "%s-e2e" % collection_version(), PORT)
    try:
        (work / "forks.py").write_text(CALLBACK)
        base.parent.mkdir(parents=True)
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(base), args.base], check=True)
        checkout_collections = os.environ["ANSIBLE_COLLECTIONS_PATH"]
        sides = {"base": (str(work / "base") + ":" + checkout_collections, base),
                 "checkout": (checkout_collections, ROOT)}
        kube.build_and_load_images(deployment.tag)
        kube.delete_namespace(deployment.namespace)
        deployment.site()
        runs = {side: [] for side in sides}
        for _round in range(args.rounds):
            for side, (collections, source) in sides.items():
                runs[side].append(converge(deployment, collections, source, work, side))
                print("%-8s %s" % (side, json.dumps(runs[side][-1])), flush=True)
        install_counters(work, deployment.kube.env["PATH"])
        counts = {side: converge(deployment, collections, source, work, side, count_calls=True)
                  for side, (collections, source) in sides.items()}
        for side, result in counts.items():
            print("%-8s counted %s" % (side, json.dumps({key: value for key, value in result.items()
                                                         if key not in ("api_calls_by_path", "kubectl_commands")})),
                  flush=True)
        median = {side: {key: statistics.median(run[key] for run in rows) for key in rows[0]}
                  for side, rows in runs.items()}
        print("no-op site.yml, median of %d: %.1f s -> %.1f s (%.2fx), tasks %d -> %d, forks %d -> %d, "
              "writes %d -> %d" % (
                  args.rounds, median["base"]["seconds"], median["checkout"]["seconds"],
                  median["base"]["seconds"] / median["checkout"]["seconds"], median["base"]["tasks"],
                  median["checkout"]["tasks"], median["base"]["forks"], median["checkout"]["forks"],
                  median["base"]["writes"], median["checkout"]["writes"]))
        print("API calls of a no-op site.yml (client side): %d -> %d (%s -> %s), kubectl runs %d -> %d" % (
            counts["base"]["api_calls"], counts["checkout"]["api_calls"], counts["base"]["api_calls_by_method"],
            counts["checkout"]["api_calls_by_method"], counts["base"]["kubectl_runs"],
            counts["checkout"]["kubectl_runs"]))
        if args.json:
            Path(args.json).write_text(json.dumps({"runs": runs, "median": median, "counted": counts}, indent=2))
        return 0 if all(run["writes"] == 0 for rows in runs.values() for run in rows) \
            and all(result["writes"] == 0 for result in counts.values()) else 1
    finally:
        deployment.delete()
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False,
                       capture_output=True)
        shutil.rmtree(str(work), ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
