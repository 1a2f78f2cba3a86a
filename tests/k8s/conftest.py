"""Tier T3: the collection on a real Kubernetes (tests/localkube), built from source on this machine.

The session starts the local cluster (idempotent: a running one is reused) and fails, never skips,
when it cannot. Each test module deploys its own Slurm cluster in a namespace of its own, with images
under a tag of its own, and deletes the namespace (and its volumes) when it ends. `make k8s` runs
three modules at a time beside a Molecule scenario: their pods ask for small CPU requests
(cluster.SMALL_REQUESTS), because this node has 2 CPUs and the scheduler counts requests.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.support.kube import start_cluster  # noqa: E402


@pytest.fixture(scope="session")
def kube():
    return start_cluster()
