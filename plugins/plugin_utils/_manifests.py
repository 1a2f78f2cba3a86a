# -*- coding: utf-8 -*-
# Copyright: (c) 2026, hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The render directory: where each manifest lives, what its file holds, and writing only what changed.

The one place that knows the directory layout (the k8s_render action writes it, the
k8s_manifest_path filter names files for the roles that read it):

    <render_dir>/<namespace>/<kind>-<name>.yaml    namespaced resources (kind in lower case)
    <render_dir>/_cluster/<kind>-<name>.yaml       cluster-scoped resources
    <render_dir>/.hpc-slurm-k8s/<index>.list       the files a cluster's writes made (the index, below)

A file holds one manifest as YAML with sorted keys (to_nice_yaml, indent 2), so an unchanged
manifest is byte-identical to its file and nothing is written. Secrets are written 0600, the rest
0644. Writes are atomic (a temporary file in the same directory, then rename), so a command that
applies the directory never reads half a file.

The index: every write of a cluster's manifests records, in an index of that cluster (one relative path
per line, in a hidden directory with an extension that `kubectl apply -R` ignores), the files it wrote,
and forgets the files it removed; an index left empty is removed (a teardown that deleted every file
leaves nothing behind). Pruning: site.yml's one write step of a full run also removes the files of the
index that no role renders any more (a resource an earlier version of the collection made), and no
other file: not one the index does not list, such as the slurmrestd service-token Secret that
slurmrestd_token.yml writes, nor a file of the site. Secrets are never listed, so never pruned (a lost
key cannot be made again).
"""

from __future__ import annotations

import os
import tempfile

from ansible.plugins.filter.core import to_nice_yaml

# Kinds that live outside any namespace: no metadata.namespace, files under <render_dir>/_cluster/.
CLUSTER_KINDS = frozenset(("Namespace", "PersistentVolume", "StorageClass", "ClusterRole", "ClusterRoleBinding",
                           "PriorityClass", "CustomResourceDefinition"))
CLUSTER_DIR = "_cluster"
SECRET_MODE = 0o600
FILE_MODE = 0o644
DIR_MODE = 0o755
INDEX_DIR = ".hpc-slurm-k8s"


class ManifestError(ValueError):
    """A definition that cannot be placed (no kind, no name, no namespace for a namespaced kind)."""


def relative_path(kind, name, namespace=None):
    """The file of one resource, relative to the render directory; `name` may be a glob ('*')."""
    if not kind or not name:
        raise ManifestError("a manifest needs a kind and metadata.name (got kind=%r, name=%r)" % (kind, name))
    if kind in CLUSTER_KINDS:
        folder = CLUSTER_DIR
    elif namespace:
        folder = namespace
    else:
        raise ManifestError("%s/%s is namespaced but has no metadata.namespace" % (kind, name))
    return "%s/%s-%s.yaml" % (folder, str(kind).lower(), name)


def manifest_path(render_dir, definition):
    meta = definition.get("metadata") or {}
    return os.path.join(render_dir, relative_path(definition.get("kind"), meta.get("name"), meta.get("namespace")))


def content(definition):
    return to_nice_yaml(definition, indent=2, sort_keys=True, width=4096)


def problems(definitions):
    """What keeps `definitions` from being applied or written: one message per manifest that lacks
    apiVersion, kind or metadata.name (by position and name); empty when all are complete."""
    if not isinstance(definitions, list):
        return ["expected a list of manifests, got %s" % type(definitions).__name__]
    found = []
    for index, definition in enumerate(definitions):
        if not isinstance(definition, dict):
            found.append("manifest %d is a %s, not a mapping" % (index, type(definition).__name__))
            continue
        meta = definition.get("metadata") if isinstance(definition.get("metadata"), dict) else {}
        missing = [field for field, value in (("apiVersion", definition.get("apiVersion")),
                                              ("kind", definition.get("kind")), ("metadata.name", meta.get("name")))
                   if not value]
        if missing:
            found.append("manifest %d (%s/%s) has no %s" % (
                index, definition.get("kind") or "?", meta.get("name") or "?", ", ".join(missing)))
    return found


def in_namespace(definitions, namespace):
    """The definitions with metadata.namespace set to `namespace` for namespaced kinds, cluster-scoped
    ones first (unchanged: a Namespace is applied before what lives in it). Incomplete definitions pass
    through as they are (problems() names them)."""
    if not isinstance(definitions, list):
        return definitions
    cluster_scoped, placed = [], []
    for definition in definitions:
        meta = definition.get("metadata") if isinstance(definition, dict) else None
        if not isinstance(meta, dict):
            placed.append(definition)
        elif definition.get("kind") in CLUSTER_KINDS:
            cluster_scoped.append(definition)
        else:
            placed.append(dict(definition, metadata=dict(meta, namespace=namespace)))
    return cluster_scoped + placed


def split_policies(definitions, state, network_policies):
    """(kept, removed): the NetworkPolicies among `definitions` follow cluster_network_policies for every
    role in this one place. With it false (and state present) they are removed (what an earlier run
    created) instead of applied; the rest, and everything when state is absent, is kept in order."""
    remove = not network_policies and state != "absent"
    removed = [d for d in definitions if remove and isinstance(d, dict) and d.get("kind") == "NetworkPolicy"]
    return [d for d in definitions if not any(d is r for r in removed)], removed


def read_text(path):
    try:
        with open(path, "r", encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def plan(render_dir, definitions, state):
    """What bringing the directory to `state` (present: every file holds its manifest; absent: no file
    of these manifests exists) takes: a list of steps (path, action, text or None, mode, secret),
    action one of 'create', 'update', 'chmod', 'remove'; unchanged files give no step."""
    return _plan(render_dir, [(definition, state) for definition in definitions])


def index_path(render_dir, index):
    """The file of the pruning index `index` (a name such as '<namespace>-<instance>')."""
    if not index or "/" in index or index.startswith("."):
        raise ManifestError("an index name must be a plain file name, got %r" % (index,))
    return os.path.join(render_dir, INDEX_DIR, index + ".list")


def plan_batches(render_dir, batches, index=None, prune=False):
    """plan() for batches collected over a play (each a dict: definitions, state, owner), in their
    order: where batches name the same file, the last one decides its state and content (a role that
    writes a resource and a later one that removes it end with no file). Returns (steps, owners):
    owners maps each step's path to the owner of the batch that decided it. An incomplete manifest
    raises ManifestError naming its owner.

    With `index` (a name, index_path()), also keeps that index (a step of its own when it changes, with
    no owner): it gains the files of the present manifests (Secrets excepted) and loses those of the
    absent ones. With `prune` (the batches hold every manifest of the run), the files the index lists
    and no batch names are removed too, and the index then lists exactly the present manifests."""
    final = {}
    for batch in batches:
        owner = batch.get("owner") or "?"
        found = problems(batch.get("definitions"))
        if found:
            raise ManifestError("manifests of %s: %s" % (owner, "; ".join(found)))
        for definition in batch["definitions"]:
            path = manifest_path(render_dir, definition)
            final[path] = (definition, batch.get("state") or "present", owner)
    steps = _plan(render_dir, [(definition, state) for definition, state, _owner in final.values()])
    owners = {path: final[path][2] for path, *_rest in steps}
    if index is not None:
        steps += _index_steps(render_dir, index_path(render_dir, index), final, prune)
    return steps, owners


def _index_steps(render_dir, index, final, prune):
    """The steps that keep `index` (see plan_batches) for `final` (path -> (definition, state, owner)):
    with `prune`, first the removal of what it lists and `final` does not name."""
    listed = (read_text(index) or "").splitlines()
    steps = []
    for relative in listed if prune else ():
        # only a manifest file of the layout (<namespace or _cluster>/<kind>-<name>.yaml), never a Secret
        parts = relative.split("/")
        if len(parts) != 2 or any(part.startswith(".") for part in parts) or not parts[1].endswith(".yaml") \
                or parts[1].startswith("secret-"):
            continue
        path = os.path.join(render_dir, relative)
        if path in final or not os.path.isfile(path):
            continue
        steps.append((path, "remove", None, None, False))
    present, absent = set(), set()
    for path, (definition, state, _owner) in final.items():
        if definition.get("kind") != "Secret":
            (present if state == "present" else absent).add(os.path.relpath(path, render_dir))
    kept = present if prune else (set(listed) - absent) | present
    text = "".join(line + "\n" for line in sorted(kept))
    current = read_text(index)
    if not kept:
        if current is not None:
            steps.append((index, "remove", None, None, False))
    elif current != text:
        steps.append((index, "create" if current is None else "update", text, FILE_MODE, False))
    return steps


def _plan(render_dir, wanted):
    steps = []
    for definition, state in wanted:
        path = manifest_path(render_dir, definition)
        secret = definition.get("kind") == "Secret"
        current = read_text(path)
        if state == "absent":
            if current is not None:
                steps.append((path, "remove", None, None, secret))
            continue
        text, mode = content(definition), SECRET_MODE if secret else FILE_MODE
        if current is None:
            steps.append((path, "create", text, mode, secret))
        elif current != text:
            steps.append((path, "update", text, mode, secret))
        elif os.stat(path).st_mode & 0o7777 != mode:
            steps.append((path, "chmod", None, mode, secret))
    return steps


def _write(path, text, mode):
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        os.makedirs(folder, mode=DIR_MODE, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".%s." % os.path.basename(path))
    try:
        os.fchmod(handle, mode)
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def apply(steps):
    for path, action, text, mode, _secret in steps:
        if action == "remove":
            os.unlink(path)
            if os.path.basename(os.path.dirname(path)) == INDEX_DIR:
                _remove_if_empty(os.path.dirname(path))
        elif action == "chmod":
            os.chmod(path, mode)
        else:
            _write(path, text, mode)


def _remove_if_empty(folder):
    try:
        os.rmdir(folder)
    except OSError:  # another cluster's index is still there
        pass
