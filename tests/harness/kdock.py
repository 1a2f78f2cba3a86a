"""kdock: reconcile a directory of rendered Kubernetes manifests onto Docker.

Test harness for hpc.slurm_k8s: it runs exactly the manifests a real cluster would receive, on a
machine that has Docker but no Kubernetes.  Only the standard library and PyYAML are used; Docker
is driven through its CLI (argument lists, never shell strings).  See README.md beside this file
for the model, the naming rules and what is approximated.
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import json
import math
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from fractions import Fraction

try:
    import yaml
except ImportError:  # pragma: no cover - reported clearly at run time
    yaml = None

DOCKER = os.environ.get("KDOCK_DOCKER", "/usr/bin/docker")
STATE_ROOT = os.environ.get("KDOCK_STATE_DIR", "/var/lib/kdock")
NODE_NAME = "kdock"
LBL = "kdock."

WORKLOAD_KINDS = ("StatefulSet", "Deployment", "DaemonSet", "Pod", "Job")
CONFIG_KINDS = ("ConfigMap", "Secret")
MODELLED_KINDS = WORKLOAD_KINDS + CONFIG_KINDS + ("Namespace", "PersistentVolumeClaim", "Service")
CLUSTER_SCOPED = {
    "Namespace", "ClusterRole", "ClusterRoleBinding", "PersistentVolume", "StorageClass",
    "CustomResourceDefinition", "PriorityClass", "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration", "IngressClass", "RuntimeClass",
}


class KdockError(Exception):
    """A failure reported to the user as one clear message (exit status 1)."""


# --------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------

_print_lock = threading.Lock()


def say(msg: str) -> None:
    with _print_lock:
        print(msg, flush=True)


def notice(msg: str) -> None:
    say(f"notice: {msg}")


# --------------------------------------------------------------------------------------------
# Manifests
# --------------------------------------------------------------------------------------------

class Obj:
    """One Kubernetes object read from DIR."""

    def __init__(self, body: dict, source: str, index: int):
        self.body = body
        self.source = source
        self.index = index
        self.kind = body.get("kind")
        meta = body.get("metadata") or {}
        self.name = meta.get("name")
        if self.kind == "Namespace":
            self.namespace = self.name
        elif self.kind in CLUSTER_SCOPED:
            self.namespace = ""
        else:
            self.namespace = meta.get("namespace") or "default"

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.name}"

    def __repr__(self) -> str:
        return f"<{self.kind} {self.namespace}/{self.name} from {self.source}>"


def load_manifests(root: str) -> list[Obj]:
    """Read every *.yaml / *.yml under root (recursively, sorted), multi-document, skip empties."""
    if yaml is None:
        raise KdockError("PyYAML is required (pip install pyyaml)")
    if not os.path.isdir(root):
        raise KdockError(f"{root}: not a directory")
    files = []
    for d, dirs, names in os.walk(root):
        dirs.sort()
        for n in names:
            if n.endswith((".yaml", ".yml")):
                files.append(os.path.join(d, n))
    files.sort()
    objs: list[Obj] = []
    seen: dict[tuple, Obj] = {}
    for f in files:
        try:
            with open(f, encoding="utf-8") as fh:
                docs = list(yaml.safe_load_all(fh))
        except yaml.YAMLError as e:
            raise KdockError(f"{f}: invalid YAML: {e}") from None
        for i, doc in enumerate(docs):
            if doc is None:
                continue
            items = [doc]
            if isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List") and "items" in doc:
                items = doc.get("items") or []
            for item in items:
                where = f"{f} (document {i + 1})"
                if not isinstance(item, dict):
                    raise KdockError(f"{where}: not a mapping")
                for field in ("apiVersion", "kind"):
                    if not item.get(field):
                        raise KdockError(f"{where}: missing {field}")
                if not isinstance(item.get("metadata"), dict) or not item["metadata"].get("name"):
                    raise KdockError(f"{where}: missing metadata.name")
                o = Obj(item, where, len(objs))
                k = (o.namespace, o.kind, o.name)
                if k in seen:
                    raise KdockError(f"{where}: duplicate {o.kind} {o.namespace}/{o.name} "
                                     f"(also in {seen[k].source})")
                seen[k] = o
                objs.append(o)
    return objs


# --------------------------------------------------------------------------------------------
# Quantities, downward API, $(VAR) expansion (pure)
# --------------------------------------------------------------------------------------------

_SUFFIXES = {
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "P": Fraction(10**15), "E": Fraction(10**18),
    "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40),
    "Pi": Fraction(2**50), "Ei": Fraction(2**60),
}
_QTY = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?")


def parse_quantity(q) -> Fraction:
    """Kubernetes resource.Quantity -> exact Fraction (e.g. '500m' -> 1/2, '1Gi' -> 2**30)."""
    if isinstance(q, bool):
        raise KdockError(f"invalid quantity {q!r}")
    if isinstance(q, int):
        return Fraction(q)
    if isinstance(q, float):
        return Fraction(str(q))
    s = str(q).strip()
    m = _QTY.fullmatch(s)
    if not m:
        raise KdockError(f"invalid quantity {q!r}")
    num = Fraction(m.group(1))
    if m.group(2):
        return num * Fraction(10) ** int(m.group(2)[1:])
    return num * _SUFFIXES[m.group(3) or ""]


def _ceil(x: Fraction) -> int:
    return math.ceil(x)


def node_allocatable() -> dict:
    mem = 0
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    return {"cpu": Fraction(os.cpu_count() or 1), "memory": Fraction(mem),
            "ephemeral-storage": Fraction(0)}


def resource_field_value(ref: dict, containers: list, this: dict, node: dict | None = None) -> str:
    """valueFrom.resourceFieldRef as the kubelet computes it (ceil to whole divisor units)."""
    cname = ref.get("containerName") or this.get("name")
    c = next((x for x in containers if x.get("name") == cname), None)
    if c is None:
        raise KdockError(f"resourceFieldRef: no container {cname!r}")
    resource = ref.get("resource", "")
    if "." not in resource:
        raise KdockError(f"resourceFieldRef: unsupported resource {resource!r}")
    which, res = resource.split(".", 1)
    if which not in ("limits", "requests") or res not in ("cpu", "memory", "ephemeral-storage"):
        raise KdockError(f"resourceFieldRef: unsupported resource {resource!r}")
    divisor = parse_quantity(ref.get("divisor", "1") or "1")
    if divisor <= 0:
        raise KdockError(f"resourceFieldRef: divisor must be positive ({ref.get('divisor')!r})")
    resources = c.get("resources") or {}
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    if which == "limits":
        if res in limits:
            val = parse_quantity(limits[res])
        else:  # the kubelet substitutes node allocatable for an unset limit
            val = (node or node_allocatable())[res]
    else:  # API defaulting copies limits into unset requests
        if res in requests:
            val = parse_quantity(requests[res])
        elif res in limits:
            val = parse_quantity(limits[res])
        else:
            val = Fraction(0)
    if res == "cpu":  # MilliValue() rounds up, then ceil(milli / divisor milli)
        return str(_ceil(Fraction(_ceil(val * 1000)) / _ceil(divisor * 1000)))
    return str(_ceil(Fraction(_ceil(val)) / _ceil(divisor)))


def expand_vars(s: str, mapping: dict) -> str:
    """Kubernetes $(VAR) expansion: $$ -> $, unknown $(X) left as is (third_party/forked/expansion)."""
    out = []
    checkpoint = 0
    cursor = 0
    n = len(s)
    while cursor < n:
        if s[cursor] == "$" and cursor + 1 < n:
            out.append(s[checkpoint:cursor])
            rest = s[cursor + 1:]
            if rest[0] == "$":
                out.append("$")
                advance = 1
            elif rest[0] == "(":
                close = rest.find(")", 1)
                if close >= 0:
                    name = rest[1:close]
                    out.append(mapping[name] if name in mapping else f"$({name})")
                    advance = close + 1
                else:
                    out.append("$(")
                    advance = 1
            else:
                out.append("$" + rest[0])
                advance = 1
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    return "".join(out) + s[checkpoint:]


def scalar_str(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return ""
    return str(v)


class PodInfo:
    """What the downward API may reveal about a pod."""

    def __init__(self, name, namespace, labels=None, annotations=None, spec=None):
        self.name = name
        self.namespace = namespace
        self.labels = labels or {}
        self.annotations = annotations or {}
        self.spec = spec or {}

    @property
    def uid(self) -> str:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"kdock:{self.namespace}/{self.name}"))


_LABEL_REF = re.compile(r"metadata\.(labels|annotations)\['([^']+)'\]")


def field_ref_value(path: str, pod: PodInfo):
    """valueFrom.fieldRef; returns None (with the reason) for fields Docker cannot provide."""
    if path == "metadata.name":
        return pod.name
    if path == "metadata.namespace":
        return pod.namespace
    if path == "metadata.uid":
        return pod.uid
    m = _LABEL_REF.fullmatch(path)
    if m:
        d = pod.labels if m.group(1) == "labels" else pod.annotations
        return scalar_str(d.get(m.group(2), ""))
    if path == "metadata.labels":
        return "\n".join(f'{k}="{v}"' for k, v in sorted(pod.labels.items()))
    if path == "metadata.annotations":
        return "\n".join(f'{k}="{v}"' for k, v in sorted(pod.annotations.items()))
    if path == "spec.nodeName":
        return NODE_NAME
    if path == "spec.serviceAccountName":
        return pod.spec.get("serviceAccountName") or pod.spec.get("serviceAccount") or "default"
    if path in ("status.podIP", "status.podIPs", "status.hostIP", "status.hostIPs"):
        return None
    raise KdockError(f"fieldRef {path!r} is not supported")


class Store:
    """ConfigMaps and Secrets of one namespace: name -> {key: bytes}."""

    def __init__(self, objs=()):
        self.configmaps: dict[str, dict[str, bytes]] = {}
        self.secrets: dict[str, dict[str, bytes]] = {}
        for o in objs:
            if o.kind == "ConfigMap":
                self.configmaps[o.name] = configmap_data(o.body)
            elif o.kind == "Secret":
                self.secrets[o.name] = secret_data(o.body)

    def get(self, kind: str, name: str):
        return (self.configmaps if kind == "ConfigMap" else self.secrets).get(name)


def configmap_data(body: dict) -> dict[str, bytes]:
    out = {k: scalar_str(v).encode() for k, v in (body.get("data") or {}).items()}
    for k, v in (body.get("binaryData") or {}).items():
        out[k] = base64.b64decode(v)
    return out


def secret_data(body: dict) -> dict[str, bytes]:
    out = {}
    for k, v in (body.get("data") or {}).items():
        try:
            out[k] = base64.b64decode(scalar_str(v), validate=True)
        except Exception:
            raise KdockError(f"Secret {body['metadata']['name']}: key {k!r} is not valid base64") from None
    for k, v in (body.get("stringData") or {}).items():
        out[k] = scalar_str(v).encode()
    return out


_ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")


def build_env(container: dict, pod: PodInfo, store: Store, notes: list | None = None) -> dict:
    """The container's environment, in Kubernetes order: envFrom, then env (with $(VAR) expansion)."""
    env: dict[str, str] = {}
    notes = notes if notes is not None else []
    containers = (pod.spec.get("containers") or []) + (pod.spec.get("initContainers") or [])
    cname = container.get("name")
    for src in container.get("envFrom") or []:
        prefix = src.get("prefix", "") or ""
        for kind, key in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
            if key not in src:
                continue
            ref = src[key] or {}
            data = store.get(kind, ref.get("name"))
            if data is None:
                if ref.get("optional"):
                    continue
                raise KdockError(f"container {cname}: envFrom {kind} {ref.get('name')!r} not found")
            for k in sorted(data):
                name = prefix + k
                if not _ENV_NAME.fullmatch(name):
                    notes.append(f"container {cname}: envFrom skips invalid variable name {name!r}")
                    continue
                env[name] = data[k].decode("utf-8", "replace")
    for e in container.get("env") or []:
        name = e.get("name")
        if not name:
            raise KdockError(f"container {cname}: env entry without name")
        vf = e.get("valueFrom")
        if not vf:
            env[name] = expand_vars(scalar_str(e.get("value", "")), env)
            continue
        if "fieldRef" in vf:
            v = field_ref_value((vf["fieldRef"] or {}).get("fieldPath", ""), pod)
            if v is None:
                notes.append(f"container {cname}: {name} ({vf['fieldRef'].get('fieldPath')}) "
                             "left unset: not known before the container starts on Docker")
                continue
            env[name] = v
        elif "resourceFieldRef" in vf:
            env[name] = resource_field_value(vf["resourceFieldRef"] or {}, containers, container)
        elif "secretKeyRef" in vf or "configMapKeyRef" in vf:
            kind, ref = (("Secret", vf["secretKeyRef"]) if "secretKeyRef" in vf
                         else ("ConfigMap", vf["configMapKeyRef"]))
            ref = ref or {}
            data = store.get(kind, ref.get("name"))
            if data is None or ref.get("key") not in data:
                if ref.get("optional"):
                    continue
                what = f"{kind} {ref.get('name')!r}" + ("" if data is None else f" key {ref.get('key')!r}")
                raise KdockError(f"container {cname}: env {name}: {what} not found")
            env[name] = data[ref["key"]].decode("utf-8", "replace")
        else:
            raise KdockError(f"container {cname}: env {name}: unsupported valueFrom {sorted(vf)}")
    return env


def command_line(container: dict, env: dict):
    """(entrypoint or None, args) for docker run, following Kubernetes command/args semantics."""
    command = [expand_vars(scalar_str(x), env) for x in (container.get("command") or [])]
    args = [expand_vars(scalar_str(x), env) for x in (container.get("args") or [])]
    if command:
        return command[0], command[1:] + args
    return None, args


def canon(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def sha(obj) -> str:
    return hashlib.sha256(canon(obj).encode()).hexdigest()


def template_hash(kind: str, template: dict, image_ids: dict, extra: dict | None = None) -> str:
    """Hash of a pod template: metadata labels/annotations, spec, resolved image IDs, extras."""
    meta = template.get("metadata") or {}
    return sha({
        "kind": kind,
        "labels": meta.get("labels") or {},
        "annotations": meta.get("annotations") or {},
        "spec": template.get("spec") or {},
        "images": image_ids,
        "extra": extra or {},
    })


# --------------------------------------------------------------------------------------------
# Projected volume files, kubelet AtomicWriter layout (pure filesystem)
# --------------------------------------------------------------------------------------------

def _mode(v, default):
    if v is None:
        return default
    return int(v)


def projected_files(vol: dict, pod: PodInfo, store: Store):
    """For configMap/secret/projected/downwardAPI volumes: {path: (bytes, mode)}; else None."""
    files: dict[str, tuple[bytes, int]] = {}
    vname = vol.get("name")

    def add_source(kind, src, default_mode):
        name = src.get("name") if kind == "ConfigMap" else src.get("secretName", src.get("name"))
        data = store.get(kind, name)
        if data is None:
            if src.get("optional"):
                return
            raise KdockError(f"volume {vname}: {kind} {name!r} not found")
        items = src.get("items")
        if items:
            for it in items:
                k = it.get("key")
                if k not in data:
                    if src.get("optional"):
                        continue
                    raise KdockError(f"volume {vname}: {kind} {name!r} has no key {k!r}")
                files[_safe_rel(it.get("path") or k, vname)] = (data[k], _mode(it.get("mode"), default_mode))
        else:
            for k, v in data.items():
                files[_safe_rel(k, vname)] = (v, default_mode)

    def add_downward(items, default_mode):
        for it in items or []:
            if "fieldRef" in it:
                v = field_ref_value(it["fieldRef"].get("fieldPath", ""), pod)
                if v is None:
                    raise KdockError(f"volume {vname}: fieldRef {it['fieldRef'].get('fieldPath')} "
                                     "is not available on Docker")
            elif "resourceFieldRef" in it:
                containers = pod.spec.get("containers") or []
                v = resource_field_value(it["resourceFieldRef"], containers, {})
            else:
                raise KdockError(f"volume {vname}: unsupported downwardAPI item {it}")
            files[_safe_rel(it["path"], vname)] = (v.encode(), _mode(it.get("mode"), default_mode))

    if "configMap" in vol:
        src = vol["configMap"] or {}
        add_source("ConfigMap", src, _mode(src.get("defaultMode"), 0o644))
    elif "secret" in vol:
        src = vol["secret"] or {}
        add_source("Secret", src, _mode(src.get("defaultMode"), 0o644))
    elif "downwardAPI" in vol:
        src = vol["downwardAPI"] or {}
        add_downward(src.get("items"), _mode(src.get("defaultMode"), 0o644))
    elif "projected" in vol:
        p = vol["projected"] or {}
        dm = _mode(p.get("defaultMode"), 0o644)
        for s in p.get("sources") or []:
            if "configMap" in s:
                add_source("ConfigMap", s["configMap"] or {}, dm)
            elif "secret" in s:
                add_source("Secret", s["secret"] or {}, dm)
            elif "downwardAPI" in s:
                add_downward((s["downwardAPI"] or {}).get("items"), dm)
            else:
                raise KdockError(f"volume {vname}: unsupported projected source {sorted(s)}")
    else:
        return None
    return files


def _safe_rel(p: str, vname: str) -> str:
    p = str(p)
    parts = p.split("/")
    if not p or p.startswith("/") or ".." in parts or parts[0].startswith(".."):
        raise KdockError(f"volume {vname}: invalid path {p!r}")
    return p


def _tree_matches(d: str, files: dict, gid) -> bool:
    found = {}
    for root, _dirs, names in os.walk(d):
        for n in names:
            full = os.path.join(root, n)
            found[os.path.relpath(full, d)] = full
    if set(found) != set(files):
        return False
    for rel, (content, mode) in files.items():
        st = os.lstat(found[rel])
        if (st.st_mode & 0o7777) != mode or (gid is not None and st.st_gid != gid):
            return False
        with open(found[rel], "rb") as fh:
            if fh.read() != content:
                return False
    return True


def atomic_write_dir(target: str, files: dict, gid: int | None = None) -> bool:
    """Write files the way the kubelet's AtomicWriter does; return True if anything changed.

    Layout: target/..<timestamp>/<files>, target/..data -> ..<timestamp>, and each top-level entry
    target/<name> -> ..data/<name>.  An update writes a new timestamped dir and swaps ..data with
    rename(2), so a reader sees either the old or the new set of files, never a mix.
    """
    os.makedirs(target, exist_ok=True)
    os.chmod(target, 0o755)
    data_link = os.path.join(target, "..data")
    old = None
    if os.path.islink(data_link):
        old = os.readlink(data_link)
        if _tree_matches(os.path.join(target, old), files, gid):
            _sync_top_links(target, files)
            return False
    stamp = time.strftime("..%Y_%m_%d_%H_%M_%S.", time.gmtime())
    new = tempfile.mkdtemp(prefix=stamp, dir=target)
    os.chmod(new, 0o755)
    for rel, (content, mode) in sorted(files.items()):
        full = os.path.join(new, rel)
        parent = os.path.dirname(full)
        if parent != new:
            os.makedirs(parent, exist_ok=True)
            os.chmod(parent, 0o755)
        with open(full, "wb") as fh:
            fh.write(content)
        os.chmod(full, mode)
        if gid is not None:
            os.chown(full, -1, gid)
    tmp_link = os.path.join(target, "..data_tmp")
    if os.path.lexists(tmp_link):
        os.unlink(tmp_link)
    os.symlink(os.path.basename(new), tmp_link)
    os.rename(tmp_link, data_link)
    _sync_top_links(target, files)
    if old and old != os.path.basename(new):
        shutil.rmtree(os.path.join(target, old), ignore_errors=True)
    return True


def _sync_top_links(target: str, files: dict) -> None:
    tops = {rel.split("/")[0] for rel in files}
    for t in tops:
        link = os.path.join(target, t)
        if not os.path.islink(link):
            if os.path.lexists(link):
                shutil.rmtree(link) if os.path.isdir(link) else os.unlink(link)
            os.symlink(f"..data/{t}", link)
    for entry in os.listdir(target):
        if entry.startswith(".."):
            continue
        if entry not in tops:
            p = os.path.join(target, entry)
            shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)


# --------------------------------------------------------------------------------------------
# Docker
# --------------------------------------------------------------------------------------------

def docker(*args, check=True, timeout=None, input=None) -> subprocess.CompletedProcess:
    cmd = [DOCKER, *[str(a) for a in args]]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=input, check=False)
    except FileNotFoundError:
        raise KdockError(f"{DOCKER} not found") from None
    except subprocess.TimeoutExpired:
        raise KdockError(f"docker {' '.join(cmd[1:3])} timed out after {timeout} s") from None
    if check and p.returncode != 0:
        raise KdockError(f"docker {' '.join(str(a) for a in args[:2])} failed: "
                         f"{(p.stderr or p.stdout).strip()}")
    return p


def inspect(kind: str, ids: list) -> list:
    if not ids:
        return []
    p = docker(kind, "inspect", *ids, check=False)
    try:
        return json.loads(p.stdout or "[]")
    except json.JSONDecodeError:
        return []


def list_containers(ens: str | None = None) -> list:
    flt = f"label={LBL}namespace" + (f"={ens}" if ens else "")
    ids = docker("ps", "-aq", "--no-trunc", "--filter", flt).stdout.split()
    return inspect("container", ids)


def list_volumes(ens: str) -> list:
    names = docker("volume", "ls", "-q", "--filter", f"label={LBL}namespace={ens}").stdout.split()
    return inspect("volume", names)


def labels_of(c: dict) -> dict:
    return (c.get("Config") or {}).get("Labels") or {}


def logs_tail(container: str, n: int = 40) -> str:
    p = docker("logs", "--tail", str(n), container, check=False)
    return ((p.stdout or "") + (p.stderr or "")).strip()


def container_ip(container: str, network: str) -> str | None:
    c = inspect("container", [container])
    if not c:
        return None
    nets = (c[0].get("NetworkSettings") or {}).get("Networks") or {}
    if network in nets and nets[network].get("IPAddress"):
        return nets[network]["IPAddress"]
    for n in nets.values():
        if n.get("IPAddress"):
            return n["IPAddress"]
    return None


def image_id(image: str, cache: dict, lock: threading.Lock) -> str:
    with lock:
        if image in cache:
            return cache[image]
    p = docker("image", "inspect", "-f", "{{.Id}}", image, check=False)
    if p.returncode != 0:
        raise KdockError(f"image {image!r} is not present locally (kdock never pulls; build or tag it first)")
    with lock:
        cache[image] = p.stdout.strip()
    return cache[image]


def state_dir(ens: str) -> str:
    return os.path.join(STATE_ROOT, ens)


def load_state(ens: str) -> dict:
    try:
        with open(os.path.join(state_dir(ens), "state.json")) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return {}


def save_state(ens: str, st: dict) -> None:
    d = state_dir(ens)
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, "state.json.tmp")
    with open(tmp, "w") as fh:
        json.dump(st, fh, indent=1, sort_keys=True)
    os.replace(tmp, os.path.join(d, "state.json"))


# --------------------------------------------------------------------------------------------
# Probes
# --------------------------------------------------------------------------------------------

def _port(p, ports: dict):
    if isinstance(p, int):
        return p
    s = str(p)
    if s.isdigit():
        return int(s)
    if s in ports:
        return ports[s]
    raise KdockError(f"probe port {p!r} is not a declared container port name")


def run_probe(probe: dict, container: str, ip: str | None, ports: dict) -> tuple[bool, str]:
    """One probe attempt: (success, output)."""
    timeout = max(int(probe.get("timeoutSeconds") or 1), 10)
    if "exec" in probe:
        cmd = [scalar_str(x) for x in (probe["exec"] or {}).get("command") or []]
        try:
            p = docker("exec", container, *cmd, check=False, timeout=timeout)
        except KdockError as e:
            return False, str(e)
        return p.returncode == 0, f"exit {p.returncode}: {(p.stdout + p.stderr).strip()[-500:]}"
    if "tcpSocket" in probe:
        t = probe["tcpSocket"] or {}
        host = t.get("host") or ip
        if not host:
            return False, "no container IP"
        port = _port(t.get("port"), ports)
        try:
            with socket.create_connection((host, port), timeout=min(timeout, 5)):
                return True, f"connected to {host}:{port}"
        except OSError as e:
            return False, f"connect {host}:{port}: {e}"
    if "httpGet" in probe:
        h = probe["httpGet"] or {}
        host = h.get("host") or ip
        if not host:
            return False, "no container IP"
        scheme = (h.get("scheme") or "HTTP").lower()
        url = f"{scheme}://{host}:{_port(h.get('port'), ports)}{h.get('path') or '/'}"
        req = urllib.request.Request(url, headers={x["name"]: x["value"] for x in h.get("httpHeaders") or []})
        ctx = ssl._create_unverified_context() if scheme == "https" else None
        try:
            with urllib.request.urlopen(req, timeout=min(timeout, 5), context=ctx) as r:
                return 200 <= r.status < 400, f"GET {url}: {r.status}"
        except urllib.error.HTTPError as e:
            return 200 <= e.code < 400, f"GET {url}: {e.code}"
        except (OSError, urllib.error.URLError) as e:
            return False, f"GET {url}: {e}"
    if "grpc" in probe:
        return True, "grpc probe not supported: treated as success"
    return False, f"unsupported probe {sorted(probe)}"


# --------------------------------------------------------------------------------------------
# Pod plans
# --------------------------------------------------------------------------------------------

class PodPlan:
    def __init__(self, ns: "NsPlan", name: str, owner: Obj, template: dict, ordinal=None):
        self.ns = ns
        self.name = name
        self.owner = owner
        self.owner_key = owner.key
        self.ordinal = ordinal
        meta = template.get("metadata") or {}
        self.labels = dict(meta.get("labels") or {})
        self.annotations = dict(meta.get("annotations") or {})
        self.spec = template.get("spec") or {}
        self.template = template
        self.subdomain = self.spec.get("subdomain")
        self.hostname = self.spec.get("hostname") or name
        self.claim_volumes: dict[str, str] = {}   # volumeClaimTemplate name -> docker volume
        self.is_job = owner.kind == "Job"
        self.template_hash = ""
        self.hash = ""
        self.ports: list[tuple] = []                # (host port, container port, protocol)
        self.aliases: list[str] = []
        self.envs: dict[str, dict] = {}
        self.notes: list[str] = []
        self.volume_files: dict[str, dict] = {}     # volume name -> projected files
        self.created_at: float | None = None

    @property
    def ens(self) -> str:
        return self.ns.ens

    @property
    def ref(self) -> str:
        return f"{self.ns.ens}/{self.name}"

    @property
    def main_name(self) -> str:
        return f"{self.ns.ens}_{self.name}"

    def container_name(self, i: int, c: dict) -> str:
        return self.main_name if i == 0 else f"{self.main_name}_{c['name']}"

    @property
    def pod_dir(self) -> str:
        return os.path.join(state_dir(self.ens), "pods", self.name)

    def info(self) -> PodInfo:
        return PodInfo(self.name, self.ns.kns, self.labels, self.annotations, self.spec)

    def container_ports(self) -> dict:
        out = {}
        for c in self.spec.get("containers") or []:
            for p in c.get("ports") or []:
                if p.get("name"):
                    out[p["name"]] = int(p["containerPort"])
        return out


class NsPlan:
    def __init__(self, kns: str, prefix: str):
        self.kns = kns
        self.ens = f"{prefix}{kns}"
        self.network = f"kdock-{self.ens}"
        self.objs: list[Obj] = []
        self.store = Store()
        self.pods: list[PodPlan] = []
        self.workloads: list[Obj] = []
        self.ignored: list[Obj] = []
        self.state: dict = {}

    def by_kind(self, kind: str) -> list[Obj]:
        return [o for o in self.objs if o.kind == kind]


def _pod_template(o: Obj) -> dict:
    if o.kind == "Pod":
        meta = o.body.get("metadata") or {}
        return {"metadata": {"labels": meta.get("labels") or {}, "annotations": meta.get("annotations") or {}},
                "spec": o.body.get("spec") or {}}
    spec = o.body.get("spec") or {}
    tmpl = spec.get("template")
    if not isinstance(tmpl, dict):
        raise KdockError(f"{o.source}: {o.kind} {o.name} has no spec.template")
    return tmpl


def _validate_pod_spec(o: Obj, spec: dict) -> None:
    cs = spec.get("containers")
    if not cs or not isinstance(cs, list):
        raise KdockError(f"{o.source}: {o.kind} {o.name}: pod spec has no containers")
    names = set()
    for c in cs + list(spec.get("initContainers") or []):
        if not isinstance(c, dict) or not c.get("name") or not c.get("image"):
            raise KdockError(f"{o.source}: {o.kind} {o.name}: every container needs name and image")
        if c["name"] in names:
            raise KdockError(f"{o.source}: {o.kind} {o.name}: duplicate container name {c['name']}")
        names.add(c["name"])


def plan_workload(ns: NsPlan, o: Obj, image_ids) -> list[PodPlan]:
    tmpl = _pod_template(o)
    spec = tmpl.get("spec") or {}
    _validate_pod_spec(o, spec)
    images = sorted({c["image"] for c in (spec.get("containers") or []) + (spec.get("initContainers") or [])})
    ids = {img: image_ids(img) for img in images}
    ospec = o.body.get("spec") or {}
    plans = []
    if o.kind == "StatefulSet":
        vcts = [t["metadata"]["name"] for t in ospec.get("volumeClaimTemplates") or []]
        thash = template_hash(o.kind, tmpl, ids, {"serviceName": ospec.get("serviceName"), "vct": vcts})
        for i in range(int(ospec.get("replicas", 1))):
            p = PodPlan(ns, f"{o.name}-{i}", o, tmpl, ordinal=i)
            p.labels["statefulset.kubernetes.io/pod-name"] = p.name
            p.labels["apps.kubernetes.io/pod-index"] = str(i)
            p.subdomain = ospec.get("serviceName") or p.subdomain
            p.claim_volumes = {t: f"kdock-{ns.ens}-{t}-{o.name}-{i}" for t in vcts}
            p.template_hash = thash
            plans.append(p)
    elif o.kind == "Deployment":
        thash = template_hash(o.kind, tmpl, ids)
        for i in range(int(ospec.get("replicas", 1))):
            p = PodPlan(ns, f"{o.name}-{thash[:10]}-{i}", o, tmpl, ordinal=i)
            p.labels["pod-template-hash"] = thash[:10]
            p.template_hash = thash
            plans.append(p)
    elif o.kind == "DaemonSet":
        p = PodPlan(ns, f"{o.name}-node", o, tmpl)
        p.template_hash = template_hash(o.kind, tmpl, ids)
        plans.append(p)
    elif o.kind == "Pod":
        p = PodPlan(ns, o.name, o, tmpl)
        p.template_hash = template_hash(o.kind, tmpl, ids)
        plans.append(p)
    elif o.kind == "Job":
        p = PodPlan(ns, o.name, o, tmpl)
        p.labels["job-name"] = o.name
        p.template_hash = template_hash(o.kind, tmpl, ids, {"backoffLimit": ospec.get("backoffLimit")})
        plans.append(p)
    return plans


def selector_matches(selector: dict, labels: dict) -> bool:
    return bool(selector) and all(labels.get(k) == scalar_str(v) for k, v in selector.items())


def finish_plans(ns: NsPlan) -> None:
    """Aliases, published ports, env, projected files, final hash; validates before any action."""
    services = list(ns.by_kind("Service"))
    kns = ns.kns
    for p in ns.pods:
        aliases = [p.name]
        if p.subdomain:
            base = f"{p.hostname}.{p.subdomain}"
            aliases += [base, f"{base}.{kns}", f"{base}.{kns}.svc", f"{base}.{kns}.svc.cluster.local"]
        for s in services:
            sel = (s.body.get("spec") or {}).get("selector") or {}
            if selector_matches(sel, p.labels):
                n = s.name
                aliases += [n, f"{n}.{kns}", f"{n}.{kns}.svc", f"{n}.{kns}.svc.cluster.local"]
        p.aliases = list(dict.fromkeys(aliases))
    # NodePort / LoadBalancer: published on 127.0.0.1 of the first matching pod (sorted by name).
    for s in services:
        sspec = s.body.get("spec") or {}
        if sspec.get("type") not in ("NodePort", "LoadBalancer"):
            continue
        sel = sspec.get("selector") or {}
        matching = sorted((p for p in ns.pods if not p.is_job and selector_matches(sel, p.labels)),
                          key=lambda p: p.name)
        if not matching:
            notice(f"service {ns.ens}/{s.name}: {sspec.get('type')} matches no pod; nothing published")
            continue
        target = matching[0]
        cports = target.container_ports()
        for sp in sspec.get("ports") or []:
            host = int(sp.get("nodePort") or sp["port"])
            tp = sp.get("targetPort", sp["port"])
            if isinstance(tp, str) and not tp.isdigit():
                if tp not in cports:
                    raise KdockError(f"service {ns.ens}/{s.name}: targetPort {tp!r} is not a port name "
                                     f"of pod {target.name}")
                tp = cports[tp]
            target.ports.append((host, int(tp), (sp.get("protocol") or "TCP").lower()))
    for p in ns.pods:
        info = p.info()
        for c in (p.spec.get("initContainers") or []) + (p.spec.get("containers") or []):
            try:
                p.envs[c["name"]] = build_env(c, info, ns.store, p.notes)
            except KdockError as e:
                raise KdockError(f"pod {p.ref}: {e}") from None
        for v in p.spec.get("volumes") or []:
            try:
                files = projected_files(v, info, ns.store)
            except KdockError as e:
                raise KdockError(f"pod {p.ref}: {e}") from None
            if files is not None:
                p.volume_files[v["name"]] = files
            elif not any(k in v for k in ("persistentVolumeClaim", "emptyDir", "hostPath")):
                kinds = sorted(k for k in v if k != "name")
                raise KdockError(f"pod {p.ref}: volume {v.get('name')}: unsupported type {kinds}")
            elif "persistentVolumeClaim" in v:
                claim = (v["persistentVolumeClaim"] or {}).get("claimName")
                if claim not in {o.name for o in ns.by_kind("PersistentVolumeClaim")}:
                    raise KdockError(f"pod {p.ref}: volume {v['name']}: PersistentVolumeClaim {claim!r} "
                                     "is not in the manifests (the pod would stay Pending)")
        names = {v["name"] for v in p.spec.get("volumes") or []} | set(p.claim_volumes)
        for c in (p.spec.get("initContainers") or []) + (p.spec.get("containers") or []):
            for m in c.get("volumeMounts") or []:
                if m.get("name") not in names:
                    raise KdockError(f"pod {p.ref}: container {c['name']}: volumeMount {m.get('name')!r} "
                                     "names no volume")
        p.hash = sha({"template": p.template_hash, "subdomain": p.subdomain, "ports": p.ports})


# --------------------------------------------------------------------------------------------
# Pod lifecycle on Docker
# --------------------------------------------------------------------------------------------

def _sec(pod_spec: dict, c: dict) -> dict:
    out = dict(pod_spec.get("securityContext") or {})
    out.pop("fsGroup", None)
    out.update(c.get("securityContext") or {})
    return out


def _cpus(q) -> str:
    v = parse_quantity(q)
    n = os.cpu_count() or 1
    if v > n:
        v = Fraction(n)
    return f"{float(v):g}"


class Pods:
    """Creates, syncs, deletes and waits for pods of one apply run."""

    def __init__(self, counters):
        self.counters = counters

    # -- volumes ---------------------------------------------------------------------------
    def sync_projected(self, p: PodPlan, report: bool) -> None:
        gid = (p.spec.get("securityContext") or {}).get("fsGroup")
        for vname, files in p.volume_files.items():
            changed = atomic_write_dir(os.path.join(p.pod_dir, "volumes", vname), files, gid)
            if changed and report:
                say(f"updated volume {vname} of pod {p.ref} (content changed; propagated in place)")
                self.counters.add("updated")

    def volume_sources(self, p: PodPlan) -> dict:
        """volume name -> ('bind', host path) | ('volume', docker volume name)."""
        src = {}
        for v in p.spec.get("volumes") or []:
            n = v["name"]
            if n in p.volume_files:
                src[n] = ("bind", os.path.join(p.pod_dir, "volumes", n))
            elif "persistentVolumeClaim" in v:
                src[n] = ("volume", f"kdock-{p.ens}-{v['persistentVolumeClaim']['claimName']}")
            elif "emptyDir" in v:
                d = os.path.join(p.pod_dir, "empty", n)
                os.makedirs(d, exist_ok=True)
                os.chmod(d, 0o777)
                src[n] = ("bind", d)
            elif "hostPath" in v:
                hp = v["hostPath"] or {}
                path = hp.get("path")
                if hp.get("type") in ("DirectoryOrCreate", None, "") and not os.path.exists(path):
                    if hp.get("type") == "DirectoryOrCreate":
                        os.makedirs(path, exist_ok=True)
                p.notes.append(f"volume {n}: hostPath {path} bind-mounted from the Docker host")
                src[n] = ("bind", path)
        for t, vol in p.claim_volumes.items():
            src[t] = ("volume", vol)
        return src

    def mount_args(self, p: PodPlan, c: dict, src: dict, env: dict) -> list:
        args = []
        for idx, m in enumerate(c.get("volumeMounts") or []):
            kind, where = src[m["name"]]
            ro = bool(m.get("readOnly")) or m["name"] in p.volume_files
            sub = m.get("subPath") or ""
            if m.get("subPathExpr"):
                sub = expand_vars(m["subPathExpr"], env)
            if sub:
                _safe_rel(sub, m["name"])
                if kind == "volume":
                    mp = docker("volume", "inspect", "-f", "{{.Mountpoint}}", where).stdout.strip()
                    kind, where = "bind", mp
                base = os.path.join(where, sub)
                if m["name"] in p.volume_files:
                    # kubelet resolves a subPath once: a snapshot, no propagation
                    snap = os.path.join(p.pod_dir, "subpath", c["name"], str(idx), os.path.basename(sub))
                    shutil.rmtree(os.path.dirname(snap), ignore_errors=True)
                    os.makedirs(os.path.dirname(snap))
                    real = os.path.realpath(base)
                    if os.path.isdir(real):
                        shutil.copytree(real, snap, symlinks=False)
                    elif os.path.exists(real):
                        shutil.copy2(real, snap)
                    else:
                        raise KdockError(f"pod {p.ref}: subPath {sub!r} not found in volume {m['name']}")
                    where = snap
                else:
                    if not os.path.exists(base):
                        os.makedirs(base, exist_ok=True)
                    where = base
            if m.get("mountPropagation"):
                p.notes.append(f"container {c['name']}: mountPropagation ignored")
            args += ["-v", f"{where}:{m['mountPath']}" + (":ro" if ro else "")]
        return args

    # -- docker run arguments --------------------------------------------------------------
    def run_args(self, p: PodPlan, c: dict, i: int, role: str, src: dict) -> list:
        spec = p.spec
        env = p.envs[c["name"]]
        name = (f"{p.main_name}_init-{c['name']}" if role == "init" else p.container_name(i, c))
        probes = {k: c[k] for k in ("readinessProbe", "startupProbe") if c.get(k)}
        prestop = ((c.get("lifecycle") or {}).get("preStop") or {})
        grace = spec.get("terminationGracePeriodSeconds")
        labels = {
            "namespace": p.ens, "kind": "Pod", "name": p.name, "owner": p.owner_key,
            "container": c["name"], "role": role, "hash": p.hash, "k8s-namespace": p.ns.kns,
            "image": c["image"], "grace": str(30 if grace is None else int(grace)),
            "probes": canon(probes), "prestop": canon(prestop), "ports": canon(p.container_ports()),
            "aliases": ",".join(p.aliases),
        }
        if p.ordinal is not None:
            labels["ordinal"] = str(p.ordinal)
        args = ["run", "-d", "--name", name]
        for k, v in labels.items():
            args += ["--label", f"{LBL}{k}={v}"]
        if i == 0 or role == "init":
            args += ["--hostname", p.hostname, "--network", p.ns.network]
            if p.subdomain:
                args += ["--domainname", f"{p.subdomain}.{p.ns.kns}.svc.cluster.local"]
            for ha in spec.get("hostAliases") or []:
                for h in ha.get("hostnames") or []:
                    args += ["--add-host", f"{h}:{ha['ip']}"]
            if role != "init":
                for a in p.aliases:
                    args += ["--network-alias", a]
                for host, cport, proto in p.ports:
                    args += ["-p", f"127.0.0.1:{host}:{cport}/{proto}"]
        else:
            args += ["--network", f"container:{p.main_name}"]
        if role == "init" or p.is_job:
            args += ["--restart", "no"]
        else:
            rp = spec.get("restartPolicy", "Always") if p.owner.kind == "Pod" else "Always"
            args += ["--restart", {"Always": "unless-stopped", "OnFailure": "on-failure",
                                   "Never": "no"}.get(rp, "unless-stopped")]
        sec = _sec(spec, c)
        if sec.get("privileged"):
            p.notes.append(f"container {c['name']}: privileged: true dropped (not passed to docker)")
        caps = sec.get("capabilities") or {}
        for cap in caps.get("add") or []:
            args += ["--cap-add", str(cap)]
        for cap in caps.get("drop") or []:
            args += ["--cap-drop", str(cap)]
        if sec.get("runAsUser") is not None:
            u = str(sec["runAsUser"])
            if sec.get("runAsGroup") is not None:
                u += f":{sec['runAsGroup']}"
            args += ["--user", u]
        elif sec.get("runAsGroup") is not None:
            p.notes.append(f"container {c['name']}: runAsGroup without runAsUser ignored")
        if sec.get("readOnlyRootFilesystem"):
            args += ["--read-only"]
        psc = spec.get("securityContext") or {}
        for g in ([psc["fsGroup"]] if psc.get("fsGroup") is not None else []) + list(psc.get("supplementalGroups") or []):
            args += ["--group-add", str(g)]
        limits = (c.get("resources") or {}).get("limits") or {}
        if "memory" in limits:
            args += ["--memory", str(_ceil(parse_quantity(limits["memory"])))]
        if "cpu" in limits:
            args += ["--cpus", _cpus(limits["cpu"])]
        if c.get("workingDir"):
            args += ["-w", c["workingDir"]]
        if c.get("tty"):
            args += ["-t"]
        if c.get("stdin"):
            args += ["-i"]
        for k, v in env.items():
            args += ["-e", f"{k}={v}"]
        args += self.mount_args(p, c, src, env)
        entry, cargs = command_line(c, env)
        if entry is not None:
            args += ["--entrypoint", entry]
        args.append(c["image"])
        args += cargs
        return args

    # -- create / delete -------------------------------------------------------------------
    def create(self, p: PodPlan, deadline: float, verb="created", why="") -> None:
        spec = p.spec
        for flag in ("hostNetwork", "hostPID", "hostIPC"):
            if spec.get(flag):
                p.notes.append(f"{flag}: true dropped (not passed to docker)")
        for c in spec.get("containers") or []:
            if c.get("livenessProbe"):
                p.notes.append(f"container {c['name']}: livenessProbe not enforced")
                break
        # a new pod starts with fresh emptyDirs and subPath snapshots
        for sub in ("empty", "subpath"):
            shutil.rmtree(os.path.join(p.pod_dir, sub), ignore_errors=True)
        os.makedirs(p.pod_dir, exist_ok=True)
        self.sync_projected(p, report=False)
        src = self.volume_sources(p)
        # stale containers of an earlier failed attempt
        stale = [c["Id"] for c in list_containers(p.ens) if labels_of(c).get(f"{LBL}name") == p.name]
        if stale:
            docker("rm", "-f", *stale, check=False)
        for c in spec.get("initContainers") or []:
            args = self.run_args(p, c, 0, "init", src)
            args.remove("-d")
            name = args[args.index("--name") + 1]
            left = max(deadline - time.time(), 1)
            try:
                r = docker(*args, check=False, timeout=left)
            except KdockError:
                docker("rm", "-f", name, check=False)
                raise KdockError(f"pod {p.ref}: init container {c['name']} did not finish before the timeout")
            if r.returncode != 0:
                out = logs_tail(name) or (r.stderr or "").strip()
                raise KdockError(f"pod {p.ref}: init container {c['name']} failed (exit {r.returncode}):\n{out}")
            docker("rm", "-f", name, check=False)
        for i, c in enumerate(spec.get("containers") or []):
            docker(*self.run_args(p, c, i, "main" if i == 0 else "extra", src))
        p.created_at = time.time()
        for n in dict.fromkeys(p.notes):
            notice(f"pod {p.ref}: {n}")
        say(f"{verb} pod {p.ref}" + (f" ({why})" if why else ""))
        self.counters.add(verb)

    @staticmethod
    def delete(ens: str, pod: str, containers: list | None = None, quiet=False, counters=None) -> None:
        if containers is None:
            containers = [c for c in list_containers(ens) if labels_of(c).get(f"{LBL}name") == pod]
        if not containers:
            return
        # preStop hooks (exec), then stop extra containers before the main one (it owns the netns)
        ordered = sorted(containers, key=lambda c: labels_of(c).get(f"{LBL}role") == "main")
        started = time.time()
        grace = max(int(labels_of(c).get(f"{LBL}grace", "30")) for c in ordered)
        for c in ordered:
            lb = labels_of(c)
            hook = json.loads(lb.get(f"{LBL}prestop") or "{}")
            running = (c.get("State") or {}).get("Running")
            if hook.get("exec") and running:
                cmd = [scalar_str(x) for x in hook["exec"].get("command") or []]
                try:
                    docker("exec", c["Id"], *cmd, check=False, timeout=max(grace, 1))
                except KdockError:
                    pass
            elif hook and running:
                notice(f"pod {ens}/{pod}: preStop {sorted(hook)} not supported (only exec)")
        left = max(int(grace - (time.time() - started)), 1)
        for c in ordered:
            docker("stop", "-t", str(left), c["Id"], check=False)
        docker("rm", "-f", *[c["Id"] for c in ordered], check=False)
        shutil.rmtree(os.path.join(state_dir(ens), "pods", pod), ignore_errors=True)
        if not quiet:
            say(f"deleted pod {ens}/{pod}")
        if counters:
            counters.add("deleted")

    # -- readiness -------------------------------------------------------------------------
    @staticmethod
    def pod_containers(ens: str, pod: str) -> list:
        cs = [c for c in list_containers(ens) if labels_of(c).get(f"{LBL}name") == pod
              and labels_of(c).get(f"{LBL}role") in ("main", "extra")]
        return sorted(cs, key=lambda c: labels_of(c).get(f"{LBL}role") != "main")

    @staticmethod
    def check_once(ens: str, pod: str, network: str) -> tuple[bool, str]:
        """(ready, reason) from one round of probes; raises if a container has exited/restarted."""
        cs = Pods.pod_containers(ens, pod)
        if not cs:
            return False, "no containers"
        ip = None
        for c in cs:
            lb = labels_of(c)
            st = c.get("State") or {}
            name = c["Name"].lstrip("/")
            if st.get("Status") in ("exited", "dead") or st.get("Restarting") or c.get("RestartCount", 0) > 0:
                how = (f"exited with code {st.get('ExitCode')}" if st.get("Status") in ("exited", "dead")
                       else "keeps exiting")
                raise KdockError(f"pod {ens}/{pod}: container {lb.get(LBL + 'container')} {how} "
                                 f"(restarted {c.get('RestartCount', 0)} time(s)); last logs:\n{logs_tail(name)}")
            if not st.get("Running"):
                return False, f"container {name} is {st.get('Status')}"
            if ip is None:
                ip = container_ip(name, network)
            probes = json.loads(lb.get(f"{LBL}probes") or "{}")
            ports = json.loads(lb.get(f"{LBL}ports") or "{}")
            for kind in ("startupProbe", "readinessProbe"):
                if kind in probes:
                    ok, out = run_probe(probes[kind], name, ip, ports)
                    if not ok:
                        return False, f"{kind} of container {lb.get(LBL + 'container')}: {out}"
        return True, "ready"

    @staticmethod
    def wait_ready(ens: str, pod: str, network: str, deadline: float, spec: dict | None = None,
                   created_at: float | None = None) -> None:
        delay = period = 0.0
        if spec:
            for c in spec.get("containers") or []:
                for k in ("startupProbe", "readinessProbe"):
                    pr = c.get(k) or {}
                    delay = max(delay, float(pr.get("initialDelaySeconds") or 0))
                    period = max(period, float(pr.get("periodSeconds") or 10))
        period = min(max(period, 0.5), 2.0)   # poll at most every 2 s (tests want speed)
        if created_at and delay:
            time.sleep(max(0.0, min(created_at + delay, deadline) - time.time()))
        last = "not checked yet"
        while True:
            ready, last = Pods.check_once(ens, pod, network)
            if ready:
                return
            if time.time() + period > deadline:
                raise KdockError(f"timeout waiting for pod {ens}/{pod} to become ready; last probe: {last}")
            time.sleep(period)


class Counters:
    def __init__(self):
        self.lock = threading.Lock()
        self.n: dict[str, int] = {}

    def add(self, k: str, by: int = 1) -> None:
        with self.lock:
            self.n[k] = self.n.get(k, 0) + by


# --------------------------------------------------------------------------------------------
# apply
# --------------------------------------------------------------------------------------------

def ensure_network(ens: str) -> None:
    net = f"kdock-{ens}"
    if docker("network", "inspect", net, check=False).returncode != 0:
        docker("network", "create", "--label", f"{LBL}namespace={ens}", "--label", f"{LBL}kind=Namespace",
               "--label", f"{LBL}name={ens}", "--label", f"{LBL}owner=Namespace/{ens}", net)
        say(f"created network {net}")


def ensure_volume(ens: str, name: str, kind: str, claim: str, owner: str, counters: Counters) -> None:
    if docker("volume", "inspect", name, check=False).returncode == 0:
        return
    docker("volume", "create", "--label", f"{LBL}namespace={ens}", "--label", f"{LBL}kind={kind}",
           "--label", f"{LBL}name={claim}", "--label", f"{LBL}owner={owner}", name)
    say(f"created volume {name}")
    counters.add("created volumes")


class Applier:
    def __init__(self, root: str, prefix: str, wait: bool, timeout: float):
        self.root = root
        self.prefix = prefix
        self.wait = wait
        self.deadline = time.time() + timeout
        self.counters = Counters()
        self.pods = Pods(self.counters)
        self.img_cache: dict = {}
        self.img_lock = threading.Lock()
        self.errors: list[str] = []

    def image_ids(self, img: str) -> str:
        return image_id(img, self.img_cache, self.img_lock)

    def plan(self) -> list[NsPlan]:
        objs = load_manifests(self.root)
        spaces: dict[str, NsPlan] = {}
        cluster_ignored = []
        for o in objs:
            if o.namespace == "":
                cluster_ignored.append(o)
                continue
            ns = spaces.setdefault(o.namespace, NsPlan(o.namespace, self.prefix))
            ns.objs.append(o)
        # A namespace directory whose manifests were all removed (a teardown) still names a namespace
        # kdock applied before: reconcile it to nothing instead of ignoring it.
        for entry in sorted(os.listdir(self.root)):
            if entry not in spaces and os.path.isdir(os.path.join(self.root, entry)):
                empty = NsPlan(entry, self.prefix)
                if os.path.exists(os.path.join(state_dir(empty.ens), "state.json")):
                    spaces[entry] = empty
        if cluster_ignored:
            say("ignored (no Docker equivalent): " + ", ".join(o.key for o in cluster_ignored))
            self.counters.add("ignored", len(cluster_ignored))
        for ns in spaces.values():
            ns.store = Store(ns.objs)
            ns.state = load_state(ns.ens)
            for o in ns.objs:
                if o.kind in WORKLOAD_KINDS:
                    ns.workloads.append(o)
                elif o.kind not in MODELLED_KINDS:
                    ns.ignored.append(o)
            # stable order: StatefulSets, Deployments, DaemonSets, Pods, Jobs, each sorted by name
            ns.workloads.sort(key=lambda o: (WORKLOAD_KINDS.index(o.kind), o.name))
            for o in ns.workloads:
                if o.kind == "Job" and int((o.body.get("spec") or {}).get("completions", 1) or 1) != 1:
                    notice(f"job {ns.ens}/{o.name}: completions != 1 approximated as one run")
                ns.pods += plan_workload(ns, o, self.image_ids)
            seen = {}
            for p in ns.pods:
                if p.name in seen:
                    raise KdockError(f"pod name {p.ref} produced by both {seen[p.name]} and {p.owner_key}")
                seen[p.name] = p.owner_key
            finish_plans(ns)
        return [spaces[k] for k in sorted(spaces)]

    def run(self) -> int:
        t0 = time.time()
        spaces = self.plan()
        for ns in spaces:
            ensure_network(ns.ens)
        for ns in spaces:
            self.apply_objects(ns)
        existing = {ns.ens: list_containers(ns.ens) for ns in spaces}
        threads = []
        for ns in spaces:
            for o in ns.workloads:
                t = threading.Thread(target=self._guard, args=(self.reconcile_workload, ns, o, existing[ns.ens]),
                                     daemon=True)
                t.start()
                threads.append(t)
        for t in threads:
            t.join()
        if not self.errors:
            for ns in spaces:
                self._guard(self.prune, ns, existing[ns.ens])
        if not self.errors and self.wait:
            for ns in spaces:
                for p in ns.pods:
                    if not p.is_job and not self.errors:
                        self._guard(Pods.wait_ready, ns.ens, p.name, ns.network, self.deadline, p.spec,
                                    p.created_at)
        elif not self.errors:
            # catch containers that died right after start even without --wait
            for ns in spaces:
                for p in ns.pods:
                    if p.created_at and not p.is_job:
                        self._guard(Pods.check_once, ns.ens, p.name, ns.network)
        for ns in spaces:
            st = ns.state
            st["objects"] = {o.key: sha(o.body) for o in ns.objs}
            st["namespace"] = ns.kns
            save_state(ns.ens, st)
        n = self.counters.n
        parts = [f"{n.get(k, 0)} {k}" for k in ("created", "recreated", "deleted", "unchanged")]
        for k in sorted(set(n) - {"created", "recreated", "deleted", "unchanged"}):
            parts.append(f"{n[k]} {k}")
        say(f"summary: {', '.join(parts)} in {time.time() - t0:.1f}s")
        if self.errors:
            for e in self.errors:
                print(f"kdock: error: {e}", file=sys.stderr, flush=True)
            return 1
        return 0

    def _guard(self, fn, *args):
        try:
            fn(*args)
        except KdockError as e:
            self.errors.append(str(e))
        except Exception as e:  # pragma: no cover - unexpected; still report, don't hang
            self.errors.append(f"internal error: {type(e).__name__}: {e}")

    # -- non-workload objects ----------------------------------------------------------------
    def apply_objects(self, ns: NsPlan) -> None:
        before = ns.state.get("objects") or {}
        for o in ns.objs:
            if o.kind in ("ConfigMap", "Secret", "Service"):
                h = sha(o.body)
                verb = "created" if o.key not in before else ("configured" if before[o.key] != h else "unchanged")
                say(f"{verb} {o.kind.lower()} {ns.ens}/{o.name}")
        for o in ns.by_kind("PersistentVolumeClaim"):
            ensure_volume(ns.ens, f"kdock-{ns.ens}-{o.name}", "PersistentVolumeClaim", o.name,
                          f"PersistentVolumeClaim/{o.name}", self.counters)
        if ns.ignored:
            say(f"ignored (no Docker equivalent) in {ns.ens}: " + ", ".join(o.key for o in ns.ignored))
            self.counters.add("ignored", len(ns.ignored))

    # -- workloads ---------------------------------------------------------------------------
    def reconcile_workload(self, ns: NsPlan, o: Obj, existing: list) -> None:
        mine = [c for c in existing if labels_of(c).get(f"{LBL}owner") == o.key]
        by_pod: dict[str, list] = {}
        for c in mine:
            by_pod.setdefault(labels_of(c)[f"{LBL}name"], []).append(c)
        plans = [p for p in ns.pods if p.owner is o]
        for p in plans:
            for t, vol in p.claim_volumes.items():
                ensure_volume(ns.ens, vol, "VolumeClaimTemplate", f"{t}-{o.name}-{p.ordinal}",
                              o.key, self.counters)
        if o.kind == "StatefulSet":
            self.rollout_statefulset(ns, o, plans, by_pod)
        elif o.kind == "Deployment":
            self.rollout_deployment(ns, o, plans, by_pod)
        elif o.kind == "Job":
            self.run_job(ns, o, plans[0], by_pod)
        else:
            for p in plans:
                state = self.pod_state(p, by_pod.get(p.name, []))
                if state == "changed":
                    self.pods.delete(ns.ens, p.name, by_pod[p.name], quiet=True)
                    self.pods.create(p, self.deadline, "recreated", "spec changed")
                elif state == "missing":
                    self.pods.create(p, self.deadline)
            for pod in sorted(set(by_pod) - {p.name for p in plans}):
                self.pods.delete(ns.ens, pod, by_pod[pod], counters=self.counters)

    def pod_state(self, p: PodPlan, cs: list) -> str:
        """'missing' | 'changed' | 'unchanged' (after syncing volumes, aliases, stopped containers)."""
        run = [c for c in cs if labels_of(c).get(f"{LBL}role") in ("main", "extra")]
        if not run:
            return "missing"
        want = len(p.spec.get("containers") or [])
        if len(run) != want or any(labels_of(c).get(f"{LBL}hash") != p.hash for c in run):
            return "changed"
        self.pods.sync_projected(p, report=True)
        main = next(c for c in run if labels_of(c).get(f"{LBL}role") == "main")
        if labels_of(main).get(f"{LBL}aliases") != ",".join(p.aliases):
            # Service selection changed: reconnect with the new aliases (no recreation)
            docker("network", "disconnect", p.ns.network, main["Id"], check=False)
            args = ["network", "connect"]
            for a in p.aliases:
                args += ["--alias", a]
            docker(*args, p.ns.network, main["Id"])
            say(f"updated aliases of pod {p.ref}: {', '.join(p.aliases)}")
        stopped = [c for c in sorted(run, key=lambda c: labels_of(c).get(f"{LBL}role") != "main")
                   if not (c.get("State") or {}).get("Running")]
        if stopped:
            for c in stopped:
                docker("start", c["Id"])
            say(f"started pod {p.ref} (containers were stopped)")
            self.counters.add("started")
            p.created_at = time.time()
            return "unchanged-started"
        say(f"unchanged pod {p.ref}")
        self.counters.add("unchanged")
        return "unchanged"

    def rollout_statefulset(self, ns: NsPlan, o: Obj, plans: list, by_pod: dict) -> None:
        spec = o.body.get("spec") or {}
        ordered_ready = spec.get("podManagementPolicy", "OrderedReady") == "OrderedReady"
        strategy = spec.get("updateStrategy") or {}
        on_delete = strategy.get("type") == "OnDelete"
        partition = int((strategy.get("rollingUpdate") or {}).get("partition") or 0)
        wanted = {p.name for p in plans}

        def ordinal(pod):
            try:
                return int(pod.rsplit("-", 1)[1])
            except (IndexError, ValueError):
                return -1
        # scale down: highest ordinal first
        for pod in sorted(set(by_pod) - wanted, key=ordinal, reverse=True):
            self.pods.delete(ns.ens, pod, by_pod[pod], counters=self.counters)
        states = {p.name: self.pod_state(p, by_pod.get(p.name, [])) for p in plans}
        # create missing pods in ordinal order
        for p in plans:
            if states[p.name] == "missing":
                self.pods.create(p, self.deadline)
                if ordered_ready:
                    self.pods.wait_ready(ns.ens, p.name, ns.network, self.deadline, p.spec, p.created_at)
            elif ordered_ready and states[p.name] == "unchanged-started":
                self.pods.wait_ready(ns.ens, p.name, ns.network, self.deadline, p.spec, p.created_at)
        # rolling update: highest ordinal first, one at a time, waiting for readiness
        for p in reversed(plans):
            if states[p.name] != "changed":
                continue
            if on_delete or (p.ordinal or 0) < partition:
                say(f"outdated pod {p.ref} (updateStrategy {'OnDelete' if on_delete else 'partition'}; not recreated)")
                self.counters.add("outdated")
                continue
            self.pods.delete(ns.ens, p.name, by_pod[p.name], quiet=True)
            self.pods.create(p, self.deadline, "recreated", "spec changed")
            self.pods.wait_ready(ns.ens, p.name, ns.network, self.deadline, p.spec, p.created_at)

    def rollout_deployment(self, ns: NsPlan, o: Obj, plans: list, by_pod: dict) -> None:
        recreate = ((o.body.get("spec") or {}).get("strategy") or {}).get("type") == "Recreate"
        wanted = {p.name for p in plans}
        old = sorted(set(by_pod) - wanted)
        if recreate:
            for pod in old:
                self.pods.delete(ns.ens, pod, by_pod[pod], counters=self.counters)
        created = []
        for p in plans:
            st = self.pod_state(p, by_pod.get(p.name, []))
            if st in ("missing", "changed"):
                if st == "changed":
                    self.pods.delete(ns.ens, p.name, by_pod[p.name], quiet=True)
                self.pods.create(p, self.deadline, "created" if st == "missing" else "recreated")
                created.append(p)
        if not recreate and old:
            for p in created:   # rolling: the new pods are ready before the old ones go
                self.pods.wait_ready(ns.ens, p.name, ns.network, self.deadline, p.spec, p.created_at)
            for pod in old:
                self.pods.delete(ns.ens, pod, by_pod[pod], counters=self.counters)

    def run_job(self, ns: NsPlan, o: Obj, p: PodPlan, by_pod: dict) -> None:
        jobs = ns.state.setdefault("jobs", {})
        cs = by_pod.get(p.name, [])
        if jobs.get(o.name) == p.hash:
            say(f"unchanged job {ns.ens}/{o.name} (succeeded earlier)")
            self.counters.add("unchanged")
            return
        if cs:
            docker("rm", "-f", *[c["Id"] for c in cs], check=False)
        backoff = int((o.body.get("spec") or {}).get("backoffLimit", 6))
        attempt = 0
        while True:
            try:
                self.pods.create(p, self.deadline, "created" if attempt == 0 else "retried",
                                 "" if attempt == 0 else f"attempt {attempt + 1}")
                code, out = self.wait_job(p)
            except KdockError as e:
                code, out = -1, str(e)
            if code == 0:
                jobs[o.name] = p.hash
                say(f"completed job {ns.ens}/{o.name}")
                return
            attempt += 1
            if attempt > backoff or time.time() > self.deadline:
                raise KdockError(f"job {ns.ens}/{o.name} failed (exit {code}, {attempt} attempt(s)); "
                                 f"last output:\n{out}")
            time.sleep(min(2 ** attempt, 15))

    def wait_job(self, p: PodPlan) -> tuple[int, str]:
        while True:
            cs = Pods.pod_containers(p.ens, p.name)
            states = [c.get("State") or {} for c in cs]
            if cs and all(s.get("Status") in ("exited", "dead") for s in states):
                code = max(abs(int(s.get("ExitCode") or 0)) for s in states)
                out = "\n".join(logs_tail(c["Name"].lstrip("/")) for c in cs)
                return code, out
            if time.time() > self.deadline:
                raise KdockError(f"job pod {p.ref} did not finish before the timeout; last logs:\n"
                                 + logs_tail(p.main_name))
            time.sleep(0.5)

    # -- pruning -----------------------------------------------------------------------------
    def prune(self, ns: NsPlan, existing: list) -> None:
        keys = {o.key for o in ns.workloads}
        gone: dict[str, dict[str, list]] = {}
        for c in existing:
            lb = labels_of(c)
            if lb.get(f"{LBL}owner") not in keys:
                gone.setdefault(lb.get(f"{LBL}owner", "?"), {}).setdefault(lb[f"{LBL}name"], []).append(c)
        for owner in sorted(gone):
            pods = gone[owner]

            def ordinal(pod):
                try:
                    return int(pod.rsplit("-", 1)[1])
                except (IndexError, ValueError):
                    return -1
            for pod in sorted(pods, key=ordinal, reverse=True):
                self.pods.delete(ns.ens, pod, pods[pod], counters=self.counters)
            say(f"deleted {owner.split('/')[0].lower()} {ns.ens}/{owner.split('/', 1)[-1]}")
        jobs = ns.state.get("jobs") or {}
        for j in [j for j in jobs if f"Job/{j}" not in keys]:
            del jobs[j]
        before = ns.state.get("objects") or {}
        now = {o.key for o in ns.objs}
        for key in sorted(before):
            kind = key.split("/")[0]
            if key not in now and kind in ("ConfigMap", "Secret", "Service"):
                say(f"deleted {kind.lower()} {ns.ens}/{key.split('/', 1)[1]}")
        claims = {o.name for o in ns.by_kind("PersistentVolumeClaim")}
        for v in list_volumes(ns.ens):
            lb = v.get("Labels") or {}
            if lb.get(f"{LBL}kind") == "PersistentVolumeClaim" and lb.get(f"{LBL}name") not in claims:
                r = docker("volume", "rm", v["Name"], check=False)
                if r.returncode == 0:
                    say(f"deleted volume {v['Name']} (PersistentVolumeClaim removed)")
                    self.counters.add("deleted volumes")
                else:
                    say(f"kept volume {v['Name']} (still in use: {r.stderr.strip()})")


# --------------------------------------------------------------------------------------------
# Other commands
# --------------------------------------------------------------------------------------------

def cmd_delete(ns: str, volumes: bool) -> int:
    cs = list_containers(ns)
    pods: dict[str, list] = {}
    for c in cs:
        pods.setdefault(labels_of(c)[f"{LBL}name"], []).append(c)
    threads = [threading.Thread(target=Pods.delete, args=(ns, pod, pcs)) for pod, pcs in sorted(pods.items())]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    net = f"kdock-{ns}"
    if docker("network", "inspect", net, check=False).returncode == 0:
        docker("network", "rm", net)
        say(f"deleted network {net}")
    if volumes:
        for v in list_volumes(ns):
            docker("volume", "rm", "-f", v["Name"])
            say(f"deleted volume {v['Name']}")
    shutil.rmtree(state_dir(ns), ignore_errors=True)
    say(f"summary: {len(pods)} pod(s) deleted from namespace {ns}")
    return 0


def find_container(ns: str, pod: str, container: str | None) -> str:
    cs = [c for c in list_containers(ns) if labels_of(c).get(f"{LBL}name") == pod
          and labels_of(c).get(f"{LBL}role") in ("main", "extra")]
    if not cs:
        raise KdockError(f"no pod {ns}/{pod}")
    for c in cs:
        lb = labels_of(c)
        if (container and lb.get(f"{LBL}container") == container) or (not container and lb.get(f"{LBL}role") == "main"):
            return c["Name"].lstrip("/")
    raise KdockError(f"pod {ns}/{pod} has no container {container!r}")


def cmd_status(ns: str | None) -> int:
    cs = list_containers(ns)
    pods: dict[tuple, list] = {}
    for c in cs:
        lb = labels_of(c)
        if lb.get(f"{LBL}role") in ("main", "extra"):
            pods.setdefault((lb[f"{LBL}namespace"], lb[f"{LBL}name"]), []).append(c)
    rows = [("NAMESPACE", "POD", "OWNER", "READY", "STATUS", "HASH", "IMAGE")]
    for (ens, pod), pcs in sorted(pods.items()):
        main = next((c for c in pcs if labels_of(c).get(f"{LBL}role") == "main"), pcs[0])
        lb = labels_of(main)
        status = (main.get("State") or {}).get("Status", "?")
        if lb.get(f"{LBL}owner", "").startswith("Job/"):
            code = (main.get("State") or {}).get("ExitCode")
            ready = "-"
            status = "Completed" if status == "exited" and code == 0 else status
        else:
            try:
                ok, why = Pods.check_once(ens, pod, f"kdock-{ens}")
                ready = "yes" if ok else "no"
            except KdockError:
                ready = "no"
                status = "crashed"
        n_ready = f"{len(pcs)}c {ready}"
        rows.append((ens, pod, lb.get(f"{LBL}owner", ""), n_ready, status, lb.get(f"{LBL}hash", "")[:12],
                     ",".join(sorted({labels_of(c).get(f"{LBL}image", "") for c in pcs}))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
    return 0


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="kdock.py", description="Reconcile Kubernetes manifests onto Docker (test harness)")
    sub = ap.add_subparsers(dest="command", required=True)
    a = sub.add_parser("apply", help="reconcile Docker to the manifests under DIR")
    a.add_argument("dir")
    a.add_argument("--namespace-prefix", default="", help="prepended to every namespace on Docker (isolation)")
    a.add_argument("--wait", action="store_true", help="wait until every pod is ready")
    a.add_argument("--timeout", type=float, default=300, help="overall deadline in seconds (default 300)")
    d = sub.add_parser("delete", help="remove everything kdock created for a namespace")
    d.add_argument("--namespace", "-n", required=True)
    d.add_argument("--volumes", action="store_true", help="also remove its docker volumes (PVC data)")
    e = sub.add_parser("exec", help="run a command in a pod container")
    e.add_argument("ns")
    e.add_argument("pod")
    e.add_argument("-c", "--container")
    e.add_argument("argv", nargs="*", help="command (put it after --)")
    lg = sub.add_parser("logs", help="container logs")
    lg.add_argument("ns")
    lg.add_argument("pod")
    lg.add_argument("-c", "--container")
    lg.add_argument("-f", "--follow", action="store_true")
    lg.add_argument("--tail")
    s = sub.add_parser("status", help="table of pods")
    s.add_argument("ns", nargs="?")
    cn = sub.add_parser("container-name", help="print the docker container name of a pod")
    cn.add_argument("ns")
    cn.add_argument("pod")
    cn.add_argument("-c", "--container")
    argv = list(sys.argv[1:] if argv is None else argv)
    rest = None
    if "--" in argv:
        i = argv.index("--")
        argv, rest = argv[:i], argv[i + 1:]
    args = ap.parse_args(argv)
    if rest is not None:
        args.argv = list(getattr(args, "argv", None) or []) + rest
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        if args.command == "apply":
            return Applier(args.dir, args.namespace_prefix, args.wait, args.timeout).run()
        if args.command == "delete":
            return cmd_delete(args.namespace, args.volumes)
        if args.command == "exec":
            cmd = args.argv
            if not cmd:
                raise KdockError("exec: no command given (kdock.py exec NS POD -- CMD...)")
            name = find_container(args.ns, args.pod, args.container)
            flags = ["-i"] + (["-t"] if sys.stdin.isatty() and sys.stdout.isatty() else [])
            return subprocess.call([DOCKER, "exec", *flags, name, *cmd])
        if args.command == "logs":
            name = find_container(args.ns, args.pod, args.container)
            extra = (["-f"] if args.follow else []) + (["--tail", args.tail] if args.tail else [])
            return subprocess.call([DOCKER, "logs", *extra, name])
        if args.command == "status":
            return cmd_status(args.ns)
        if args.command == "container-name":
            print(find_container(args.ns, args.pod, args.container))
            return 0
    except KdockError as e:
        print(f"kdock: error: {e}", file=sys.stderr)
        return 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
