"""Helpers shared by the Docker-harness end-to-end tests (test_*_e2e.py).

Each test module deploys its own cluster in a namespace, with image tags and a login port of its
own, so that modules (and a build of the shared tag) never touch each other's pods.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DOCKER = "/usr/bin/docker"
KDOCK = [sys.executable, str(HERE / "kdock.py")]
RECAP = re.compile(r"localhost\s*:\s*ok=(\d+)\s+changed=(\d+).*failed=(\d+)")


def run(argv, timeout=900, check=True, **kwargs):
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, **kwargs)
    if check and proc.returncode != 0:
        raise AssertionError("%s failed (rc=%s)\n--- stdout\n%s\n--- stderr\n%s" % (
            " ".join(map(str, argv)), proc.returncode, proc.stdout[-6000:], proc.stderr[-4000:]))
    return proc


def wait_for(predicate, timeout, what, interval=0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))


def require_docker():
    """Skip without a Docker engine, except in CI, where a missing engine is a failure."""
    if shutil.which(DOCKER) and run([DOCKER, "info"], check=False).returncode == 0:
        return
    message = "the Docker harness needs a running Docker engine (make harness starts one)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def collection_version():
    return re.search(r"^version:\s*(\S+)", (ROOT / "galaxy.yml").read_text(), re.M).group(1)


def docker_connection(container):
    """cluster_slurmctld_connection (and the like) for a harness container: docker exec, not kubectl."""
    return {"ansible_connection": "community.docker.docker", "ansible_host": container,
            "ansible_python_interpreter": "/usr/bin/python3"}


def playbook(path, vars_file, *extra, check=True, log_dir=None, when_output=None):
    """Run a playbook; return (process, changed count of the recap, seconds).

    when_output=(text, action): call action() once, while the playbook runs, as soon as a line of
    its output contains text (to act on the cluster at a precise point of a play).
    """
    env = dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", PYTHONUNBUFFERED="1")
    argv = ["ansible-playbook", str(path), "-e", "@%s" % vars_file, *extra]
    started = time.monotonic()
    if when_output is None:
        proc = run(argv, env=env, timeout=1500, check=False)
    else:
        proc = _run_watching(argv, env, *when_output)
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


def _run_watching(argv, env, text, action):
    lines, acted = [], False
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) as child:
        for line in child.stdout:
            lines.append(line)
            if not acted and text in line:
                acted = True
                action()
        returncode = child.wait(timeout=1500)
    proc = subprocess.CompletedProcess(argv, returncode, "".join(lines), "")
    assert acted, "never saw %r in the output of %s" % (text, " ".join(map(str, argv)))
    return proc
