"""Tier T3: render mode stays proven on a real cluster: site.yml writes the manifests to a directory
(touching no cluster), `kubectl apply --server-side` of that directory (what a GitOps controller does)
brings up a cluster that runs jobs, and a second render changes no file."""

from __future__ import annotations

import os

import pytest

from tests.k8s.cluster import SlurmOnKube
from tests.support.proc import collection_version, wait_for

NAME = "render"


@pytest.fixture(scope="module")
def rendered(kube, tmp_path_factory):
    tag = "%s-render" % collection_version()
    workdir = tmp_path_factory.mktemp("render")
    deployment = SlurmOnKube(kube, workdir, NAME, tag, 30062, cluster_render_dir=str(workdir / "render"))
    kube.build_and_load_images(tag)
    kube.delete_namespace(deployment.namespace)
    position = kube.audit_position()
    _proc, changed, seconds = deployment.site()
    deployment.timings["render_s"] = seconds
    assert changed > 0
    assert kube.writes_since(position, deployment.namespace) == [], "render mode wrote to the cluster"
    yield deployment
    if os.environ.get("KEEP_E2E") != "1":
        deployment.delete()


def test_a_second_render_changes_nothing(rendered):
    _proc, changed, _seconds = rendered.site()
    assert changed == 0


def test_kubectl_apply_of_the_rendered_directory_runs_jobs(rendered):
    render_dir = rendered.variables["cluster_render_dir"]
    assert os.path.exists(os.path.join(render_dir, rendered.namespace, "statefulset-slurmctld.yaml"))
    rendered.kube.kubectl("apply", "--server-side", "--field-manager=gitops", "-R", "-f", render_dir, timeout=300)
    wait_for(rendered.pods_ready, 300, "every rendered pod ready")
    rendered.wait_nodes({"slurmd-0": "idle", "slurmd-1": "idle"}, 120)
    rendered.wait_for_login()
    assert sorted(rendered.ssh("srun -N2 hostname").stdout.split()) == ["slurmd-0", "slurmd-1"]
    labels = rendered.kube.get("namespace", rendered.namespace)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
