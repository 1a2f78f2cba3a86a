# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The render directory (plugins/plugin_utils/_manifests.py): the naming rule, what counts as unchanged,
atomic writes with the right modes, and reading back through the k8s_resources lookup."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat

import pytest

from ansible.errors import AnsibleLookupError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from ansible_collections.hpc.slurm_k8s.plugins.lookup.k8s_resources import LookupModule
from ansible_collections.hpc.slurm_k8s.plugins.plugin_utils import _manifests

CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "slurm-config", "namespace": "slurm",
                                                                   "labels": {"app": "slurm"}},
             "data": {"slurm.conf": "ClusterName=slurm\n", "b": True}}
SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "munge-key", "namespace": "slurm"},
          "data": {"munge.key": "c2VjcmV0"}}
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "slurm"}}


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("kind, name, namespace, expected", [
    ("ConfigMap", "slurm-config", "slurm", "slurm/configmap-slurm-config.yaml"),
    ("StatefulSet", "*", "slurm", "slurm/statefulset-*.yaml"),
    ("Namespace", "slurm", None, "_cluster/namespace-slurm.yaml"),
    ("PriorityClass", "slurm", "ignored", "_cluster/priorityclass-slurm.yaml"),
])
def test_one_naming_rule(kind, name, namespace, expected):
    assert _manifests.relative_path(kind, name, namespace) == expected


def test_a_namespaced_kind_without_namespace_is_an_error():
    with pytest.raises(_manifests.ManifestError, match="ConfigMap/x is namespaced but has no metadata.namespace"):
        _manifests.relative_path("ConfigMap", "x")


def test_cluster_scoped_first_and_namespace_set():
    placed = _manifests.in_namespace([dict(CONFIGMAP, metadata={"name": "a", "namespace": "other"}), NAMESPACE], "slurm")
    assert [doc["kind"] for doc in placed] == ["Namespace", "ConfigMap"]
    assert placed[1]["metadata"]["namespace"] == "slurm" and "namespace" not in placed[0]["metadata"]


def test_problems_name_the_incomplete_manifest():
    assert _manifests.problems([CONFIGMAP, {"kind": "Service", "metadata": {}},
                                {"apiVersion": "v1", "kind": "Service"}, "text"]) == [
        "manifest 1 (Service/?) has no apiVersion, metadata.name", "manifest 2 (Service/?) has no metadata.name",
        "manifest 3 is a str, not a mapping"]
    assert _manifests.problems([CONFIGMAP, SECRET, NAMESPACE]) == []


def test_create_then_nothing_then_update_then_remove(tmp_path):
    steps = _manifests.plan(str(tmp_path), [CONFIGMAP, SECRET, NAMESPACE], "present")
    assert [(os.path.relpath(path, str(tmp_path)), action) for path, action, _t, _m, _s in steps] == [
        ("slurm/configmap-slurm-config.yaml", "create"), ("slurm/secret-munge-key.yaml", "create"),
        ("_cluster/namespace-slurm.yaml", "create")]
    _manifests.apply(steps)
    text = (tmp_path / "slurm" / "configmap-slurm-config.yaml").read_text()
    # the format the directory has always had: sorted keys, indent 2, booleans as YAML booleans
    assert text.startswith("apiVersion: v1\ndata:\n  b: true\n  slurm.conf: 'ClusterName=slurm\n\n    '\nkind: ConfigMap\n")
    assert mode(str(tmp_path / "slurm" / "secret-munge-key.yaml")) == 0o600
    assert mode(str(tmp_path / "slurm" / "configmap-slurm-config.yaml")) == 0o644
    assert mode(str(tmp_path / "slurm")) == 0o755
    assert sorted(os.listdir(str(tmp_path / "slurm"))) == ["configmap-slurm-config.yaml", "secret-munge-key.yaml"]

    assert _manifests.plan(str(tmp_path), [CONFIGMAP, SECRET, NAMESPACE], "present") == []

    os.chmod(str(tmp_path / "slurm" / "secret-munge-key.yaml"), 0o644)
    changed = dict(CONFIGMAP, data={"slurm.conf": "ClusterName=other\n"})
    steps = _manifests.plan(str(tmp_path), [changed, SECRET], "present")
    assert [action for _p, action, _t, _m, _s in steps] == ["update", "chmod"]
    _manifests.apply(steps)
    assert "ClusterName=other" in (tmp_path / "slurm" / "configmap-slurm-config.yaml").read_text()
    assert mode(str(tmp_path / "slurm" / "secret-munge-key.yaml")) == 0o600

    steps = _manifests.plan(str(tmp_path), [changed, SECRET, dict(SECRET, metadata={"name": "gone", "namespace": "slurm"})],
                            "absent")
    assert [action for _p, action, _t, _m, _s in steps] == ["remove", "remove"]
    _manifests.apply(steps)
    assert os.listdir(str(tmp_path / "slurm")) == []


def test_batches_collected_over_a_play_are_planned_as_one_the_last_batch_deciding(tmp_path):
    """site.yml's roles add batches (resources role, begin/flush); a file that two batches name ends as
    the later one says, and each changed file names the owner of the batch that decided it."""
    _manifests.apply(_manifests.plan(str(tmp_path), [dict(CONFIGMAP, metadata={"name": "old", "namespace": "slurm"})],
                                     "present"))
    changed = dict(CONFIGMAP, data={"slurm.conf": "ClusterName=other\n"})
    batches = [
        {"owner": "config", "state": "present", "definitions": [CONFIGMAP, NAMESPACE]},
        {"owner": "login", "state": "present", "definitions": [changed]},
        {"owner": "powersave", "state": "absent", "definitions": [dict(CONFIGMAP, metadata={"name": "old", "namespace": "slurm"})]},
        {"owner": "empty", "state": "present", "definitions": []},
    ]
    steps, owners = _manifests.plan_batches(str(tmp_path), batches)
    by_file = {os.path.relpath(path, str(tmp_path)): (action, owners[path]) for path, action, _t, _m, _s in steps}
    assert by_file == {"slurm/configmap-slurm-config.yaml": ("create", "login"),
                       "_cluster/namespace-slurm.yaml": ("create", "config"),
                       "slurm/configmap-old.yaml": ("remove", "powersave")}
    _manifests.apply(steps)
    assert "ClusterName=other" in (tmp_path / "slurm" / "configmap-slurm-config.yaml").read_text()
    assert _manifests.plan_batches(str(tmp_path), batches) == ([], {})


def _relative_steps(root, steps):
    return sorted((os.path.relpath(path, str(root)), action) for path, action, _t, _m, _s in steps)


def test_pruning_removes_only_what_the_index_lists_and_no_batch_names(tmp_path):
    """The first run with an index records the present manifests but Secrets; a later run removes the
    listed files that no batch names (and records the new set), never a Secret, a file it did not list,
    or a listed path outside the layout."""
    root = tmp_path / "render"
    retired = dict(CONFIGMAP, metadata={"name": "retired", "namespace": "slurm"})
    first = [{"owner": "config", "definitions": [CONFIGMAP, retired]}]
    steps, owners = _manifests.plan_batches(str(root), first, "slurm-slurm", prune=True)
    assert _relative_steps(root, steps) == [(".hpc-slurm-k8s/slurm-slurm.list", "create"),
                                            ("slurm/configmap-retired.yaml", "create"),
                                            ("slurm/configmap-slurm-config.yaml", "create")]
    assert sorted(owners.values()) == ["config", "config"]  # the index has no owner
    _manifests.apply(steps)
    index = root / ".hpc-slurm-k8s" / "slurm-slurm.list"
    assert index.read_text() == "slurm/configmap-retired.yaml\nslurm/configmap-slurm-config.yaml\n"
    assert mode(str(index)) == 0o644
    assert _manifests.plan_batches(str(root), first, "slurm-slurm", prune=True) == ([], {})

    # a Secret and paths outside the layout in the index, a file of the site not in it
    _manifests.apply(_manifests.plan(str(root), [SECRET], "present"))
    (root / "slurm" / "configmap-site.yaml").write_text("site\n")
    (tmp_path / "outside.yaml").write_text("outside\n")
    index.write_text(index.read_text() + "slurm/secret-munge-key.yaml\n../outside.yaml\n/etc/passwd\n"
                     ".hpc-slurm-k8s/slurm-slurm.list\n")
    steps, owners = _manifests.plan_batches(str(root), [{"owner": "config", "definitions": [CONFIGMAP]}],
                                            "slurm-slurm", prune=True)
    assert _relative_steps(root, steps) == [(".hpc-slurm-k8s/slurm-slurm.list", "update"),
                                            ("slurm/configmap-retired.yaml", "remove")]
    assert owners == {}
    _manifests.apply(steps)
    assert sorted(os.listdir(str(root / "slurm"))) == ["configmap-site.yaml", "configmap-slurm-config.yaml",
                                                       "secret-munge-key.yaml"]
    assert (tmp_path / "outside.yaml").exists()
    assert index.read_text() == "slurm/configmap-slurm-config.yaml\n"


def test_the_index_follows_writes_and_removals_and_goes_when_empty(tmp_path):
    """Without pruning (a day-2 playbook, a --tags run, teardown), the index gains what a write makes and
    loses what it removes, and removes nothing else; a write that removes every listed file (a teardown
    with its volumes) removes the index and its directory, unless another cluster's index is in it."""
    root = tmp_path / "render"
    retired = dict(CONFIGMAP, metadata={"name": "retired", "namespace": "slurm"})
    _manifests.apply(_manifests.plan_batches(str(root), [{"definitions": [CONFIGMAP, retired, SECRET]}],
                                             "slurm-slurm")[0])
    index = root / ".hpc-slurm-k8s" / "slurm-slurm.list"
    assert index.read_text() == "slurm/configmap-retired.yaml\nslurm/configmap-slurm-config.yaml\n"
    (root / ".hpc-slurm-k8s" / "other-x.list").write_text("other/configmap-x.yaml\n")

    # a write of one manifest prunes nothing and keeps the other listed file
    steps, _owners = _manifests.plan_batches(str(root), [{"definitions": [CONFIGMAP]}], "slurm-slurm")
    assert steps == []
    # a removal forgets that file only
    steps, _owners = _manifests.plan_batches(str(root), [{"state": "absent", "definitions": [retired]}],
                                             "slurm-slurm")
    assert _relative_steps(root, steps) == [(".hpc-slurm-k8s/slurm-slurm.list", "update"),
                                            ("slurm/configmap-retired.yaml", "remove")]
    _manifests.apply(steps)
    assert index.read_text() == "slurm/configmap-slurm-config.yaml\n"

    # removing the last listed file (and a Secret, never listed) removes the index; the other stays
    steps, owners = _manifests.plan_batches(str(root), [{"state": "absent", "definitions": [CONFIGMAP, SECRET]}],
                                            "slurm-slurm")
    assert _relative_steps(root, steps) == [(".hpc-slurm-k8s/slurm-slurm.list", "remove"),
                                            ("slurm/configmap-slurm-config.yaml", "remove"),
                                            ("slurm/secret-munge-key.yaml", "remove")]
    assert str(index) not in owners
    _manifests.apply(steps)
    assert os.listdir(str(root / ".hpc-slurm-k8s")) == ["other-x.list"]
    assert _manifests.plan_batches(str(root), [{"state": "absent", "definitions": [CONFIGMAP]}],
                                   "slurm-slurm") == ([], {})

    # the last index of the directory goes with it
    (root / ".hpc-slurm-k8s" / "other-x.list").unlink()
    _manifests.apply(_manifests.plan_batches(str(root), [{"definitions": [CONFIGMAP]}], "slurm-slurm")[0])
    _manifests.apply(_manifests.plan_batches(str(root), [{"state": "absent", "definitions": [CONFIGMAP]}],
                                             "slurm-slurm")[0])
    assert sorted(os.listdir(str(root))) == ["slurm"]


@pytest.mark.parametrize("name", ["", "../x", "a/b", ".hidden"])
def test_an_index_name_is_a_plain_file_name(tmp_path, name):
    with pytest.raises(_manifests.ManifestError, match="plain file name"):
        _manifests.plan_batches(str(tmp_path), [], name)


def test_an_incomplete_manifest_in_a_batch_names_its_owner(tmp_path):
    with pytest.raises(_manifests.ManifestError, match=r"manifests of slurmd: manifest 1 \(Service/\?\) has no metadata.name"):
        _manifests.plan_batches(str(tmp_path), [{"owner": "config", "definitions": [CONFIGMAP]},
                                                {"owner": "slurmd", "definitions": [CONFIGMAP, {"apiVersion": "v1", "kind": "Service"}]}])
    assert os.listdir(str(tmp_path)) == []


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    _manifests.apply(_manifests.plan(str(tmp_path), [CONFIGMAP], "present"))
    before = (tmp_path / "slurm" / "configmap-slurm-config.yaml").read_text()

    def broken(_fd):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(OSError, match="disk full"):
        _manifests.apply(_manifests.plan(str(tmp_path), [dict(CONFIGMAP, data={"x": "y"})], "present"))
    assert (tmp_path / "slurm" / "configmap-slurm-config.yaml").read_text() == before
    assert os.listdir(str(tmp_path / "slurm")) == ["configmap-slurm-config.yaml"]


def lookup(render_dir, **kwargs):
    loader = DataLoader()
    plugin = LookupModule(loader=loader, templar=Templar(loader=loader))
    return plugin.run([], variables={"cluster_namespace": "slurm", "cluster_render_dir": str(render_dir)}, **kwargs)


def test_the_lookup_reads_the_directory_by_the_same_rule(tmp_path):
    other = dict(CONFIGMAP, metadata={"name": "other", "namespace": "slurm", "labels": {"app": "x"}})
    _manifests.apply(_manifests.plan(str(tmp_path), [CONFIGMAP, other, SECRET, NAMESPACE], "present"))
    assert lookup(tmp_path, kind="ConfigMap", name="slurm-config") == [CONFIGMAP]
    assert lookup(tmp_path, kind="ConfigMap", name="missing") == []
    assert [doc["metadata"]["name"] for doc in lookup(tmp_path, kind="ConfigMap")] == ["other", "slurm-config"]
    assert lookup(tmp_path, kind="ConfigMap", label_selector="app=slurm") == [CONFIGMAP]
    assert lookup(tmp_path, kind="Namespace", name="slurm") == [NAMESPACE]
    assert lookup(tmp_path, kind="Secret", namespace="elsewhere") == []
    with pytest.raises(AnsibleLookupError, match="key=value terms only"):
        lookup(tmp_path, kind="ConfigMap", label_selector="app!=slurm")
