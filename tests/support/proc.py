"""Running commands and playbooks, and waiting for a condition: one implementation for every tier."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECAP = re.compile(r"localhost\s*:\s*ok=(\d+)\s+changed=(\d+).*failed=(\d+)")


def run(argv, timeout=900, check=True, **kwargs):
    """subprocess.run with text output; check=True raises with the command, rc and both outputs."""
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, check=False,
                          **kwargs)
    if check and proc.returncode != 0:
        raise AssertionError("%s failed (rc=%s)\n--- stdout\n%s\n--- stderr\n%s" % (
            " ".join(map(str, argv)), proc.returncode, proc.stdout[-6000:], proc.stderr[-4000:]))
    return proc


def wait_for(predicate, timeout, what, interval=0.5, log=None, error=AssertionError):
    """Poll until predicate() is truthy and return that value; after `timeout` s raise `error` naming
    `what`, with the last lines of `log` (a file) when given. The one wait of every tier.

    Only for reaching a state that then lasts (a final state); never to catch a transient one."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            tail = ""
            if log is not None and Path(log).exists():
                tail = "\n--- last lines of %s ---\n%s" % (
                    log, "\n".join(Path(log).read_text(errors="replace").splitlines()[-15:]))
            raise error("timed out after %.0f s waiting for %s%s" % (timeout, what, tail))
        time.sleep(interval)


def collection_version():
    return re.search(r"^version:\s*(\S+)", (ROOT / "galaxy.yml").read_text(), re.M).group(1)


def playbook(path, vars_file, *extra, check=True, log_dir=None, when_output=None, env=None, timeout=1500):
    """Run a playbook; return (process, changed count of the recap, seconds).

    when_output=(text, action): call action() once, while the playbook runs, as soon as a line of
    its output contains text (to act on the cluster at a precise point of a play).
    """
    env = dict(os.environ if env is None else env, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1",
               PYTHONUNBUFFERED="1")
    argv = ["ansible-playbook", str(path), "-e", "@%s" % vars_file, *extra]
    started = time.monotonic()
    if when_output is None:
        proc = run(argv, env=env, timeout=timeout, check=False)
    else:
        proc = _run_watching(argv, env, timeout, *when_output)
    seconds = time.monotonic() - started
    if log_dir is not None:
        log_dir = Path(log_dir)
        number = len(list(log_dir.glob("*.log"))) + 1
        (log_dir / ("%02d-%s.log" % (number, Path(path).stem))).write_text(proc.stdout + proc.stderr)
    if check and proc.returncode != 0:
        raise AssertionError("%s failed (rc=%s)\n--- stdout\n%s\n--- stderr\n%s" % (
            " ".join(map(str, argv)), proc.returncode, proc.stdout[-6000:], proc.stderr[-4000:]))
    recap = RECAP.search(proc.stdout)
    assert recap, proc.stdout[-3000:] + proc.stderr[-2000:]
    return proc, int(recap.group(2)), seconds


def _run_watching(argv, env, timeout, text, action):
    lines, acted = [], False
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) as child:
        for line in child.stdout:
            lines.append(line)
            if not acted and text in line:
                acted = True
                action()
        returncode = child.wait(timeout=timeout)
    proc = subprocess.CompletedProcess(argv, returncode, "".join(lines), "")
    assert acted, "never saw %r in the output of %s (rc=%s)\n--- output\n%s" % (
        text, " ".join(map(str, argv)), returncode, proc.stdout[-6000:])
    return proc
