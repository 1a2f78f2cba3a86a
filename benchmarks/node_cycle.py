"""Benchmark: drain + queue check + resume of ALL nodes of a 2,000-node Slurm cluster.

Side by side, in one run, against one real slurmctld (Debian's Slurm 22.05) with 2,000 defined nodes
(no slurmd is needed to drain a node):

  modules     the three steps through our modules, each run as Ansible runs a module (a Python
              process reading its arguments from a file), and their in-process time (module logic
              only, interpreter start-up excluded)
  ansible     the same three steps as `ansible localhost -m ...` commands (what a playbook pays)
  loop        a per-node shell-style loop: `scontrol update` per node to drain, one `squeue` for the
              queue check, `scontrol update` per node to resume
  raw         one raw `scontrol update` of all nodes (drain) and one (resume): the floor

Usage (as root, after `make deps`):
    .venv/bin/python benchmarks/node_cycle.py [--nodes 2000] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT / ".cache" / "collections"))
from slurmhost import SlurmHostCluster  # noqa: E402

MODULES = "ansible_collections.hpc.slurm_k8s.plugins.modules"


def timed(function):
    started = time.perf_counter()
    result = function()
    return time.perf_counter() - started, result


def run(argv, env, check=True):
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError("%s failed: %s %s" % (argv, proc.stdout[-2000:], proc.stderr[-2000:]))
    return proc


def module_process(module, args, env, workdir):
    """Run a module the way Ansible's local execution does: `python -m module ARGSFILE`."""
    argsfile = Path(workdir) / ("%s.json" % module)
    argsfile.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    proc = run([sys.executable, "-m", "%s.%s" % (MODULES, module), str(argsfile)], env)
    result = json.loads(proc.stdout)
    if result.get("failed"):
        raise RuntimeError("%s failed: %s" % (module, result.get("msg")))
    return result


def module_in_process(module, args, env):
    """The module's own logic: main() in this process, without interpreter start-up and imports."""
    import importlib
    from ansible.module_utils.testing import patch_module_args

    mod = importlib.import_module("%s.%s" % (MODULES, module))
    old = dict(os.environ)
    os.environ.update(env)
    try:
        with patch_module_args(args):
            devnull = open(os.devnull, "w")
            saved, sys.stdout = sys.stdout, devnull
            try:
                started = time.perf_counter()
                try:
                    mod.main()
                except SystemExit:
                    pass
                return time.perf_counter() - started
            finally:
                sys.stdout = saved
                devnull.close()
    finally:
        os.environ.clear()
        os.environ.update(old)


def ansible_adhoc(module, args, env):
    argv = ["ansible", "localhost", "-m", "hpc.slurm_k8s.%s" % module] + (["-a", json.dumps(args)] if args else [])
    proc = run(argv,
               dict(env, ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false"))
    return proc


STEPS = [
    ("slurm_node", {"nodes": ["ALL"], "state": "drained", "reason": "benchmark", "tag": "bench"}),
    ("slurm_job_info", {}),
    ("slurm_node", {"nodes": ["ALL"], "state": "resumed", "tag": "bench"}),
]


def assert_all(cluster, drained):
    out = cluster.run(["sinfo", "-h", "-N", "-o", "%N %t"]).stdout.split("\n")
    states = [line.split()[1] for line in out if line.strip()]
    want = ("drain" in s for s in states) if drained else ("drain" not in s for s in states)
    if not all(want):
        raise RuntimeError("not every node is %s" % ("drained" if drained else "undrained"))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-nodes-") as workdir:
        os.chmod(workdir, 0o755)  # slurmctld drops to SlurmUser, which must reach its state dir
        cluster = SlurmHostCluster(Path(workdir) / "cluster", nodes=args.nodes, port_base=18800,
                                   accounting=False, start_slurmd=False)
        cluster.start()
        env = dict(cluster.env, PYTHONPATH=str(ROOT / ".cache" / "collections"),
                   ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".cache" / "collections"))
        try:
            figures = {"nodes": args.nodes, "slurm": cluster.run(["scontrol", "--version"]).stdout.strip()}

            # modules as processes
            per_step = []
            for module, margs in STEPS:
                seconds, result = timed(lambda: module_process(module, margs, env, workdir))
                per_step.append(seconds)
                if module == "slurm_node":
                    assert_all(cluster, margs["state"] == "drained")
                    assert len(result["changed_nodes"]) == args.nodes, result["msg"]
            figures["modules_process_s"] = sum(per_step)
            figures["modules_process_steps_s"] = per_step

            # module logic in-process
            in_process = [module_in_process(module, margs, env) for module, margs in STEPS]
            assert_all(cluster, False)
            figures["modules_in_process_s"] = sum(in_process)

            # through ansible
            seconds = timed(lambda: [ansible_adhoc(module, margs, env) for module, margs in STEPS])[0]
            assert_all(cluster, False)
            figures["ansible_adhoc_s"] = seconds

            # per-node loop
            names = cluster.node_names

            def loop():
                for name in names:
                    run(["scontrol", "update", "nodename=%s" % name, "state=drain", "reason=benchmark"], env)
                run(["squeue", "-h", "-o", "%i %T"], env)
                for name in names:
                    # never-registered nodes are undrained but answer "Invalid node state specified"
                    run(["scontrol", "update", "nodename=%s" % name, "state=undrain"], env, check=False)
            seconds = timed(loop)[0]
            assert_all(cluster, False)
            figures["per_node_loop_s"] = seconds

            # one raw scontrol call each way
            hostlist = "n[1-%d]" % args.nodes
            drain_s = timed(lambda: run(["scontrol", "update", "nodename=%s" % hostlist, "state=drain",
                                         "reason=benchmark"], env))[0]
            resume_s = timed(lambda: run(["scontrol", "update", "nodename=%s" % hostlist, "state=undrain"], env,
                                         check=False))[0]
            figures["raw_scontrol_drain_s"] = drain_s
            figures["raw_scontrol_resume_s"] = resume_s
        finally:
            cluster.stop()

    figures["speedup_modules_vs_loop"] = figures["per_node_loop_s"] / figures["modules_process_s"]
    figures["speedup_ansible_vs_loop"] = figures["per_node_loop_s"] / figures["ansible_adhoc_s"]
    print("drain + queue check + resume of ALL %(nodes)d nodes (%(slurm)s)" % figures)
    print("  modules (3 module processes)      %8.3f s   steps: %s" % (
        figures["modules_process_s"], ", ".join("%.3f" % s for s in figures["modules_process_steps_s"])))
    print("  modules (logic in-process)        %8.3f s" % figures["modules_in_process_s"])
    print("  ansible localhost -m (3 commands) %8.3f s" % figures["ansible_adhoc_s"])
    print("  per-node loop (2 x %d updates)   %8.3f s" % (args.nodes, figures["per_node_loop_s"]))
    print("  raw scontrol: drain %.3f s, undrain %.3f s" % (figures["raw_scontrol_drain_s"], figures["raw_scontrol_resume_s"]))
    print("  speed-up: modules %.0fx, ansible %.0fx faster than the per-node loop" % (
        figures["speedup_modules_vs_loop"], figures["speedup_ansible_vs_loop"]))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
