"""Tier T3: the collection on a real Kubernetes (tests/localkube), built from source on this machine.

The session starts the local cluster (idempotent: a running one is reused) and fails, never skips,
when it cannot. Each test module deploys its own Slurm cluster in a namespace of its own, with images
under a tag of its own, and deletes the namespace (and its volumes) when it ends. `make k8s` runs
three modules at a time beside a Molecule scenario: their pods ask for small CPU requests
(cluster.SMALL_REQUESTS), because this node has 2 CPUs and the scheduler counts requests.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.support.kube import start_cluster  # noqa: E402

# When each test ran, on which xdist worker (lane), from the start of its setup to the end of its teardown:
# one JSON object a line, a file per worker, rewritten by each run. The tier is CPU-bound (two cores, three
# lanes and Molecule): the lanes' ends show how well the modules are spread (tests/output is kept by CI).
TIMELINE = Path(__file__).resolve().parents[1] / "output" / ("k8s-timeline-%s.jsonl" % os.environ.get("PYTEST_XDIST_WORKER", "main"))


def pytest_sessionstart(session):  # pylint: disable=unused-argument
    TIMELINE.parent.mkdir(parents=True, exist_ok=True)
    TIMELINE.write_text("")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):  # pylint: disable=unused-argument
    started = time.time()
    yield
    with TIMELINE.open("a") as timeline:
        timeline.write(json.dumps({"test": item.nodeid, "start": round(started, 1), "end": round(time.time(), 1)}) + "\n")


@pytest.fixture(scope="session")
def kube():
    return start_cluster()
