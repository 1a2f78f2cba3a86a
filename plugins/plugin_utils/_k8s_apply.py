# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the k8s_apply action (the resources role's API backend) applies, waits for and skips.

A server-side apply of an unchanged manifest changes nothing, but it is still a write request
(PATCH) to the API server, for every resource on every run. The k8s_apply action instead stamps each
manifest with a digest of itself (k8s_stamp), reads the live objects, and applies only the manifests
k8s_outdated returns: those whose live object is missing, carries another digest (the manifest
changed, including fields it no longer sets), or no longer holds what the manifest sets (someone
edited a field we own: the apply puts it back).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from decimal import Decimal, InvalidOperation


class ApplyError(ValueError):
    """A manifest list the comparison cannot use."""


DIGEST_ANNOTATION = "hpc.slurm-k8s/manifest-sha256"

_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|[numkMGTPE]|[KMGTPE]i)?$")
_SUFFIX = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
           "k": Decimal(10) ** 3, "M": Decimal(10) ** 6, "G": Decimal(10) ** 9, "T": Decimal(10) ** 12,
           "P": Decimal(10) ** 15, "E": Decimal(10) ** 18, "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20,
           "Gi": Decimal(2) ** 30, "Ti": Decimal(2) ** 40, "Pi": Decimal(2) ** 50, "Ei": Decimal(2) ** 60}


def _quantity(value):
    """A Kubernetes quantity as a number ("1Gi" == "1024Mi", "0.5" == "500m"), else None."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    match = _QUANTITY.match(str(value))
    if not match:
        return None
    number, suffix = match.group(1), match.group(2) or ""
    try:
        if suffix[:1] in ("e", "E"):
            return Decimal(number + suffix)
        return Decimal(number) * _SUFFIX[suffix]
    except (InvalidOperation, KeyError):
        return None


def _empty(value):
    return value is None or value == {} or value == []


def _holds(live, want):
    """True when the live value holds everything `want` sets (the server adds defaults, drops empty
    values and canonicalises quantities)."""
    if isinstance(want, dict):
        if not isinstance(live, dict):
            return _empty(want) and _empty(live)
        return all(_holds(live[key], value) if key in live else _empty(value) for key, value in want.items())
    if isinstance(want, list):
        if not isinstance(live, list):
            return not want and _empty(live)
        return len(live) == len(want) and all(_holds(lv, wv) for lv, wv in zip(live, want))
    if want is None:
        return _empty(live)
    if live == want or (not isinstance(live, (dict, list)) and str(live) == str(want)):
        return True
    live_q, want_q = _quantity(live), _quantity(want)
    return live_q is not None and live_q == want_q


def _key(obj):
    meta = obj.get("metadata") or {}
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    return (group, obj.get("kind"), meta.get("namespace") or "", meta.get("name"))


def k8s_stamp(definitions):
    """Each manifest with a digest of its own content in the annotation hpc.slurm-k8s/manifest-sha256."""
    if not isinstance(definitions, list):
        raise ApplyError("k8s_stamp expects a list of manifests, got %s" % type(definitions).__name__)
    stamped = []
    for definition in definitions:
        canonical = json.dumps(definition, sort_keys=True, separators=(",", ":"), default=str)
        # copies of the two dicts that change, not of the whole manifest: a deep copy of Ansible's
        # tagged values costs ~0.1 s a manifest
        meta = dict(definition.get("metadata") or {})
        meta["annotations"] = dict(meta.get("annotations") or {},
                                   **{DIGEST_ANNOTATION: hashlib.sha256(canonical.encode()).hexdigest()})
        stamped.append(dict(definition, metadata=meta))
    return stamped


def k8s_outdated(definitions, live_objects):
    """The stamped manifests whose live object is missing, stamped differently, or drifted."""
    if not isinstance(definitions, list) or not isinstance(live_objects, list):
        raise ApplyError("k8s_outdated expects two lists (stamped manifests, live objects)")
    live_by_key = {_key(obj): obj for obj in live_objects if isinstance(obj, dict)}
    outdated = []
    for definition in definitions:
        live = live_by_key.get(_key(definition))
        want_digest = ((definition.get("metadata") or {}).get("annotations") or {}).get(DIGEST_ANNOTATION)
        if want_digest is None:
            raise ApplyError("k8s_outdated: %s/%s is not stamped (pass it through k8s_stamp first)"
                             % (definition.get("kind"), (definition.get("metadata") or {}).get("name")))
        if live is None or ((live.get("metadata") or {}).get("annotations") or {}).get(DIGEST_ANNOTATION) != want_digest:
            outdated.append(definition)
            continue
        want = definition
        if definition.get("kind") == "Secret" and definition.get("stringData"):
            # the API server folds stringData into data (base64)
            want = dict(definition)
            data = dict(want.get("data") or {})
            for key, value in want.pop("stringData").items():
                data[key] = base64.b64encode(str(value).encode()).decode()
            want["data"] = data
        if not _holds(live, want):
            outdated.append(definition)
    return outdated


def k8s_existing(definitions, live_objects):
    """The manifests among `definitions` whose object is among `live_objects` (what a deletion must delete)."""
    live = {_key(obj) for obj in live_objects if isinstance(obj, dict)}
    return [definition for definition in definitions if _key(definition) in live]


def k8s_reads(definitions):
    """The k8s_info queries that read every live object of `definitions` in as few requests as possible:
    one list per apiVersion, kind and namespace; cluster-scoped objects (no namespace) by name."""
    reads, seen = [], set()
    for definition in definitions:
        meta = definition.get("metadata") or {}
        query = {"api_version": definition.get("apiVersion"), "kind": definition.get("kind")}
        if meta.get("namespace"):
            query["namespace"] = meta["namespace"]
        else:
            query["name"] = meta.get("name")
        key = json.dumps(query, sort_keys=True)
        if key not in seen:
            seen.add(key)
            reads.append(query)
    return reads


WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet")


def _ready(obj):
    """Whether a live workload has rolled out and is ready, by the rules kubernetes.core's waiter uses."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    if status.get("observedGeneration", 0) < (obj.get("metadata") or {}).get("generation", 0):
        return False
    kind = obj.get("kind")
    if kind == "DaemonSet":
        desired = status.get("desiredNumberScheduled", 0)
        return status.get("numberReady", 0) == desired and status.get("updatedNumberScheduled", 0) == desired
    replicas = spec.get("replicas", 1)
    if kind == "Deployment":
        return (status.get("updatedReplicas", 0) == replicas and status.get("availableReplicas", 0) == replicas
                and not status.get("unavailableReplicas"))
    rolled = (spec.get("updateStrategy") or {}).get("type") == "OnDelete" or status.get("updatedReplicas", 0) == replicas
    return status.get("readyReplicas", 0) == replicas and rolled


def k8s_unready(definitions, live_objects, applied=None):
    """The workloads among `definitions`, except those `applied` now (their apply waited), whose live
    object (already read) is not rolled out and ready: the only ones a re-run has to wait for."""
    live_by_key = {_key(obj): obj for obj in live_objects if isinstance(obj, dict)}
    skip = {_key(obj) for obj in applied or []}
    return [definition for definition in definitions if definition.get("kind") in WORKLOAD_KINDS
            and _key(definition) not in skip and not _ready(live_by_key.get(_key(definition)) or {})]
