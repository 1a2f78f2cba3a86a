"""Benchmark: site.yml in render mode (cluster_render_dir), this checkout against a baseline revision.

Side by side, in one run, alternating the two for each value set of tests/static/values/:

  first     a render into an empty directory (Secrets generated, every file written)
  no-op     the same run again on that directory (nothing may change)

For each it reports the wall time, the tasks executed (ok in the recap: changed ones included) and
the module runs (counted by a callback: each task, or loop item, that ran and whose action does not
run inside the controller, i.e. not set_fact/assert/debug/include/meta or one of our controller-side
actions; `copy` runs two modules per file and counts once), and checks that
the two revisions render byte-identical files once they hold the same Secrets (the checkout re-renders
a copy of the baseline's directory and must report changed=0 and leave it unchanged; with a baseline
from before render-mode pruning, the one change allowed is the pruning index it creates).

Usage (as root, after `make deps`; BASE defaults to the last commit before the render rework):
    .venv/bin/python benchmarks/render_speed.py [--base REV] [--sets defaults,powersave-two-groups] [--json out.json]
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
VALUES = ROOT / "tests" / "static" / "values"
# the venv's ansible-playbook (the benchmark runs with .venv/bin/python), else the one on PATH
ANSIBLE_PLAYBOOK = str(Path(sys.executable).with_name("ansible-playbook")) \
    if Path(sys.executable).with_name("ansible-playbook").exists() else "ansible-playbook"
RECAP = re.compile(r"localhost\s*:\s*ok=(\d+)\s+changed=(\d+)")
# actions that run in the controller process (no module fork)
CONTROLLER_ACTIONS = {"set_fact", "assert", "debug", "include_tasks", "include_role", "import_tasks", "meta",
                      "fail", "check_inputs", "cluster_model", "k8s_render", "k8s_apply", "validate_argument_spec",
                      "include_vars"}
CALLBACK = '''
from ansible.plugins.callback import CallbackBase
import json, os
class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "forks"
    CALLBACK_NEEDS_ENABLED = True
    def __init__(self):
        super().__init__()
        self.actions = []
    def _count(self, result):
        results = result._result.get("results")
        ran = len([item for item in results if not item.get("skipped")]) if results else 1
        self.actions.append((result._task.action.rpartition(".")[2], ran, bool(result._result.get("skipped"))))
    v2_runner_on_ok = v2_runner_on_failed = _count
    def v2_playbook_on_stats(self, stats):
        with open(os.environ["FORKS_OUT"], "w") as out:
            json.dump(self.actions, out)
'''


def forks(actions):
    return sum(items for action, items, skipped in actions if action not in CONTROLLER_ACTIONS and not skipped)


def render(collections, source, variables, render_dir, callbacks):
    vars_file = Path(str(render_dir) + ".json")
    vars_file.write_text(json.dumps(dict(variables, cluster_render_dir=str(render_dir))))
    counted = Path(str(render_dir) + ".forks.json")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections, ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",
               ANSIBLE_CALLBACK_PLUGINS=str(callbacks), ANSIBLE_CALLBACKS_ENABLED="forks", FORKS_OUT=str(counted),
               ANSIBLE_PIPELINING="1", ANSIBLE_NOCOLOR="1")
    started = time.monotonic()
    proc = subprocess.run([ANSIBLE_PLAYBOOK, "playbooks/site.yml", "-e", "@%s" % vars_file], cwd=str(source),
                          env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    recap = RECAP.search(proc.stdout)
    if proc.returncode != 0 or not recap:
        raise SystemExit("render failed (%s, %s):\n%s" % (source, render_dir, proc.stdout[-3000:]))
    return {"seconds": round(seconds, 2), "tasks": int(recap.group(1)), "changed": int(recap.group(2)),
            "forks": forks(json.loads(counted.read_text()))}


# site.yml's pruning index (plugins/plugin_utils/_manifests.py): bookkeeping, not a manifest; a baseline
# from before pruning has none, and the checkout's re-render of its directory then creates it (its one change)
INDEX_DIR = ".hpc-slurm-k8s"


def identical(left, right):
    compared = filecmp.dircmp(str(left), str(right), ignore=[INDEX_DIR])
    if compared.left_only or compared.right_only or compared.diff_files or compared.funny_files:
        return False
    return all(identical(Path(left) / sub, Path(right) / sub) for sub in compared.common_dirs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="f494ffe")
    parser.add_argument("--sets", default=",".join(sorted(path.stem for path in VALUES.glob("*.yml"))))
    parser.add_argument("--json")
    args = parser.parse_args()
    collections_of_checkout = str(ROOT / ".cache" / "collections")
    work = Path(tempfile.mkdtemp(prefix="render-speed-"))
    try:
        (work / "forks.py").write_text(CALLBACK)
        base = work / "base" / "ansible_collections" / "hpc" / "slurm_k8s"
        base.parent.mkdir(parents=True)
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(base), args.base], check=True)
        sides = {"base": (str(work / "base") + ":" + collections_of_checkout, base),
                 "checkout": (collections_of_checkout, ROOT)}
        results = {}
        for name in args.sets.split(","):
            variables = yaml.safe_load((VALUES / ("%s.yml" % name)).read_text()) or {}
            row = {}
            for side, (collections, source) in sides.items():
                out = work / side / name
                out.parent.mkdir(parents=True, exist_ok=True)
                row[side] = {"first": render(collections, source, variables, out, work),
                             "no-op": render(collections, source, variables, out, work)}
            copy = work / "same-secrets" / name
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(str(work / "base" / name), str(copy))
            again = render(collections_of_checkout, ROOT, variables, copy, work)
            index_created = not (work / "base" / name / INDEX_DIR).exists()
            row["byte_identical"] = again["changed"] == int(index_created) and identical(work / "base" / name, copy)
            results[name] = row
            print("%-26s first %6.1f s -> %5.1f s (%.1fx)  no-op %5.1f s -> %5.1f s (%.1fx)  forks %d -> %d  "
                  "tasks %d -> %d  byte-identical: %s" % (
                      name, row["base"]["first"]["seconds"], row["checkout"]["first"]["seconds"],
                      row["base"]["first"]["seconds"] / row["checkout"]["first"]["seconds"],
                      row["base"]["no-op"]["seconds"], row["checkout"]["no-op"]["seconds"],
                      row["base"]["no-op"]["seconds"] / row["checkout"]["no-op"]["seconds"],
                      row["base"]["first"]["forks"], row["checkout"]["first"]["forks"],
                      row["base"]["first"]["tasks"], row["checkout"]["first"]["tasks"], row["byte_identical"]),
                  flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2))
        return 0 if all(row["byte_identical"] for row in results.values()) else 1
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(work / "base" / "ansible_collections"
                                                                                     / "hpc" / "slurm_k8s")],
                       check=False, capture_output=True)
        shutil.rmtree(str(work), ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
