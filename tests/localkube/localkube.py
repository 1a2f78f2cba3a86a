#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A real single-node Kubernetes on this machine, every component a host process.

The way upstream's hack/local-up-cluster.sh runs one, with the binaries tests/localkube/build.sh makes:
etcd, kube-apiserver (Node,RBAC authorization; NodeRestriction and PodSecurity admission; an audit
log of every write), kube-controller-manager, kube-scheduler, containerd + runc, kubelet, kube-proxy
(iptables mode: ClusterIP and NodePort), CoreDNS (Service names), kube-router's NetworkPolicy
controller, and a hostPath provisioner behind the default StorageClass "standard" (any access mode,
ReadWriteMany included).

    localkube.py start            idempotent: starts what is not running, waits until it all works
    localkube.py stop             stops everything, removes every pod, mount, rule and interface it made
                                  (first waits until no test holds LOCALKUBE_USERS_LOCK, below)
    localkube.py purge            stop, then delete all cluster state (etcd, volumes, certificates)
    localkube.py status           one line per component
    localkube.py load-images IMG...   copy images from the Docker engine into containerd (unchanged ones skip,
                                  one it has under another name is tagged)
    localkube.py env              shell exports (KUBECONFIG, PATH with kubectl)

Every failure names the component, the reason and the component's log file, and exits 1.
Users of the cluster (make k8s: the T3 tests) hold LOCALKUBE_USERS_LOCK, a file, shared while they run;
`stop` and `purge` take it exclusively before anything else, so that they wait for those users to end
(and what else a caller does before them, such as a teardown of its own Slurm cluster, overlaps them).
Paths: state /var/lib/hpc-localkube, logs /var/log/hpc-localkube, sockets/pids /run/hpc-localkube.
Why each setting is what it is: tests/localkube/README.md.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import fcntl
import gzip
import hashlib
import io
import json
import os
import shutil
import shlex
import signal
import socket
import ssl
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
STATE = Path(os.environ.get("LOCALKUBE_STATE", "/var/lib/hpc-localkube"))
LOGS = Path(os.environ.get("LOCALKUBE_LOGS", "/var/log/hpc-localkube"))
RUN = Path(os.environ.get("LOCALKUBE_RUN", "/run/hpc-localkube"))
PKI = STATE / "pki"
CONF = STATE / "conf"
KUBECONFIG = STATE / "admin.kubeconfig"
AUDIT_LOG = LOGS / "audit.log"

NODE = "hpc-localkube"
BRIDGE = "lk0"
# The bridge's address is the node's address: pods reach the API server, the kubelet and DNS on it.
NODE_IP = "10.244.0.1"
POD_SUBNET = "10.244.0.0/24"        # the node's pod range (the first /24 of CLUSTER_CIDR)
CLUSTER_CIDR = "10.244.0.0/16"
SERVICE_CIDR = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"
CLUSTER_DOMAIN = "cluster.local"
API_PORT = 6443
ETCD_CLIENT = "http://127.0.0.1:2379"
CONTAINERD_SOCK = RUN / "containerd.sock"
FORWARD_CHAIN = "LOCALKUBE-FORWARD"
PAUSE_IMAGE = "docker.io/hpc-localkube/pause:%s"
PROVISIONER = "localkube.invalid/hostpath"
RUNC = "/usr/sbin/runc"
DOCKER = os.environ.get("LOCALKUBE_DOCKER", "/usr/bin/docker")


class LocalKubeError(Exception):
    """A failure of one component: what, why, and where to look."""

    def __init__(self, component: str, reason: str, log: Path | None = None) -> None:
        self.component, self.reason, self.log = component, reason, log
        super().__init__("%s: %s" % (component, reason))

    def report(self) -> str:
        lines = ["localkube: ERROR: %s: %s" % (self.component, self.reason)]
        if self.log is not None:
            lines.append("localkube: %s log: %s" % (self.component, self.log))
            if self.log.exists():
                tail = self.log.read_text(errors="replace").splitlines()[-25:]
                lines += ["    " + line for line in tail]
        return "\n".join(lines)


def say(message: str) -> None:
    print("localkube: %s" % message, flush=True)


def run(argv: list[str], check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    proc = subprocess.run(argv, check=False, **kwargs)
    if check and proc.returncode != 0:
        raise LocalKubeError(Path(argv[0]).name, "%s exited %d: %s" % (
            " ".join(argv), proc.returncode, (proc.stderr or proc.stdout or "").strip()[-2000:]))
    return proc


# --- binaries ----------------------------------------------------------------------------------------

def binaries(required: bool = True) -> dict[str, Path]:
    """Where build.sh put each component (it fails, naming the component, if one is not built).

    required=False (for stop and status): bare names when something is not built, which is enough to
    recognise and stop processes that an earlier build started."""
    proc = subprocess.run(["bash", str(HERE / "build.sh"), "--print"], capture_output=True, text=True, check=False)
    if proc.returncode != 0 and required:
        raise LocalKubeError("build", proc.stderr.strip().replace("kube-build: ERROR: ", "") + " (make deps builds it)")
    dirs = collections.defaultdict(str, (line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line))
    bins: dict[str, Path] = {}
    for component, names in {
            "kubernetes": ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy",
                           "kubectl"],
            "etcd": ["etcd"], "containerd": ["containerd", "containerd-shim-runc-v2", "ctr"],
            "cri-tools": ["crictl"], "coredns": ["coredns"], "kube-router": ["kube-router"],
            "hostpath-provisioner": ["hostpath-provisioner"], "pause": ["pause"]}.items():
        for name in names:
            bins[name] = Path(dirs[component]) / name
    bins["cni"] = Path(dirs["cni-plugins"])
    return bins


def versions() -> dict[str, str]:
    values = {}
    for line in (HERE / "versions.env").read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, value = line.split("=", 1)
            values[key.strip()] = value.strip()
    return values


# --- certificates ------------------------------------------------------------------------------------

@dataclass
class Cert:
    name: str
    cn: str
    org: str = ""
    server_names: list[str] = field(default_factory=list)   # IP:... / DNS:... subjectAltNames
    client: bool = True


CERTS = [
    Cert("kube-apiserver", "kube-apiserver", client=False, server_names=[
        "IP:127.0.0.1", "IP:%s" % NODE_IP, "IP:%s" % KUBERNETES_SERVICE_IP, "DNS:localhost", "DNS:kubernetes",
        "DNS:kubernetes.default", "DNS:kubernetes.default.svc", "DNS:kubernetes.default.svc.%s" % CLUSTER_DOMAIN]),
    Cert("kubelet-serving", NODE, client=False, server_names=["IP:%s" % NODE_IP, "IP:127.0.0.1", "DNS:%s" % NODE]),
    Cert("admin", "kubernetes-admin", "system:masters"),
    Cert("apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters"),
    Cert("kube-controller-manager", "system:kube-controller-manager"),
    Cert("kube-scheduler", "system:kube-scheduler"),
    Cert("kubelet", "system:node:%s" % NODE, "system:nodes"),
    Cert("kube-proxy", "system:kube-proxy"),
    # the host-process add-ons: users of their own, with the ClusterRoles of ADDON_RBAC below
    Cert("coredns", "hpc-localkube:coredns"),
    Cert("provisioner", "hpc-localkube:provisioner"),
    Cert("kube-router", "hpc-localkube:kube-router"),
]


# Bumped when the certificates change shape: a state directory with another version gets new ones.
PKI_VERSION = "2"


def ensure_pki(running: bool) -> None:
    """A CA, a service-account key and one certificate per component; made once, kept across restarts.

    The CA and leaf certificates carry keyUsage, basicConstraints and key identifiers: Python 3.13's
    default TLS verification (VERIFY_X509_STRICT, in the pods' python3) refuses a CA without them."""
    PKI.mkdir(parents=True, exist_ok=True)
    os.chmod(PKI, 0o700)
    ca_key, ca_crt, marker = PKI / "ca.key", PKI / "ca.crt", PKI / ".version"
    if ca_crt.exists() and (marker.read_text().strip() if marker.exists() else "") != PKI_VERSION:
        if running:
            raise LocalKubeError("pki", "the certificates in %s are of an older kind: run `localkube.py stop` "
                                        "and start again (they are made anew)" % PKI)
        for cert in [c.name for c in CERTS] + ["ca"]:
            for suffix in (".crt", ".key"):
                (PKI / (cert + suffix)).unlink(missing_ok=True)
    if not ca_crt.exists():
        run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(ca_key)])
        run(["openssl", "req", "-x509", "-new", "-key", str(ca_key), "-subj", "/CN=hpc-localkube-ca",
             "-days", "3650", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
             "-addext", "subjectKeyIdentifier=hash", "-out", str(ca_crt)])
    if not (PKI / "service-account.key").exists():
        run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-out", str(PKI / "service-account.key")])
        run(["openssl", "pkey", "-in", str(PKI / "service-account.key"), "-pubout",
             "-out", str(PKI / "service-account.pub")])
    for cert in CERTS:
        key, crt = PKI / ("%s.key" % cert.name), PKI / ("%s.crt" % cert.name)
        if crt.exists():
            continue
        run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(key)])
        subject = "/CN=%s" % cert.cn + ("/O=%s" % cert.org if cert.org else "")
        csr = run(["openssl", "req", "-new", "-key", str(key), "-subj", subject]).stdout
        ext = ["basicConstraints=critical,CA:FALSE", "keyUsage=critical,digitalSignature",
               "extendedKeyUsage=%s" % ("clientAuth" if cert.client else "serverAuth"),
               "subjectKeyIdentifier=hash", "authorityKeyIdentifier=keyid,issuer"]
        if cert.server_names:
            ext.append("subjectAltName=" + ",".join(cert.server_names))
        with tempfile.NamedTemporaryFile("w", suffix=".ext") as extfile:
            extfile.write("\n".join(ext) + "\n")
            extfile.flush()
            run(["openssl", "x509", "-req", "-CA", str(ca_crt), "-CAkey", str(ca_key), "-CAcreateserial",
                 "-days", "3650", "-extfile", extfile.name, "-out", str(crt)], input=csr)
    marker.write_text(PKI_VERSION + "\n")
    for path in PKI.iterdir():
        os.chmod(path, 0o600 if path.suffix == ".key" else 0o644)


def kubeconfig(user: str, path: Path, server: str = "https://127.0.0.1:%d" % API_PORT) -> None:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "hpc-localkube",
        "clusters": [{"name": "hpc-localkube",
                      "cluster": {"server": server, "certificate-authority": str(PKI / "ca.crt")}}],
        "users": [{"name": user, "user": {"client-certificate": str(PKI / ("%s.crt" % user)),
                                          "client-key": str(PKI / ("%s.key" % user))}}],
        "contexts": [{"name": "hpc-localkube", "context": {"cluster": "hpc-localkube", "user": user}}],
    }, indent=2) + "\n")
    os.chmod(path, 0o600)


# --- configuration files ------------------------------------------------------------------------------

def write_if_changed(path: Path, content: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != content:
        path.write_text(content)
    os.chmod(path, mode)


def write_configs(bins: dict[str, Path], ver: dict[str, str]) -> None:
    CONF.mkdir(parents=True, exist_ok=True)
    for user in ("admin", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "coredns",
                 "provisioner", "kube-router"):
        kubeconfig(user, CONF / ("%s.kubeconfig" % user))
    shutil.copyfile(CONF / "admin.kubeconfig", KUBECONFIG)
    os.chmod(KUBECONFIG, 0o600)

    # Every write to the API, with who made it: the tests count a no-op re-run's writes (must be 0).
    write_if_changed(CONF / "audit-policy.yaml", textwrap.dedent("""\
        apiVersion: audit.k8s.io/v1
        kind: Policy
        omitStages: [RequestReceived]
        rules:
          - level: Metadata
            verbs: [create, update, patch, delete, deletecollection]
          - level: None
        """))

    cni_dir = CONF / "cni"
    write_if_changed(cni_dir / "10-localkube.conflist", json.dumps({
        "cniVersion": "1.0.0", "name": "localkube",
        "plugins": [
            {"type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": True, "hairpinMode": True,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_SUBNET, "gateway": NODE_IP}]],
                      "routes": [{"dst": "0.0.0.0/0"}], "dataDir": str(STATE / "cni-ipam")}},
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ]}, indent=2) + "\n")

    # restrict_oom_score_adj: root here lacks CAP_SYS_RESOURCE, so any negative oom_score_adj fails
    # container creation; the kubelet asks -997 (Guaranteed pods) and -998 (sandboxes). containerd
    # clamps them to its own value (0), as rootless setups do.
    write_if_changed(CONF / "containerd.toml", textwrap.dedent("""\
        version = 3
        root = "{state}/containerd"
        state = "{run}/containerd"
        [grpc]
          address = "{sock}"
        [ttrpc]
          address = "{sock}.ttrpc"
        [plugins.'io.containerd.cri.v1.images']
          snapshotter = "overlayfs"
          [plugins.'io.containerd.cri.v1.images'.pinned_images]
            sandbox = "{pause}"
        [plugins.'io.containerd.cri.v1.runtime']
          restrict_oom_score_adj = true
          enable_selinux = false
          disable_apparmor = true
          [plugins.'io.containerd.cri.v1.runtime'.containerd]
            default_runtime_name = "runc"
            [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
              runtime_type = "io.containerd.runc.v2"
              # ours, not the older one Debian's containerd (Docker's) puts in PATH
              runtime_path = "{shim}"
              [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
                BinaryName = "{runc}"
                SystemdCgroup = false
          [plugins.'io.containerd.cri.v1.runtime'.cni]
            bin_dirs = ["{cni_bin}"]
            conf_dir = "{cni_conf}"
        [plugins.'io.containerd.grpc.v1.cri']
          stream_server_address = "127.0.0.1"
          stream_server_port = "0"
        """).format(state=STATE, run=RUN, sock=CONTAINERD_SOCK, pause=PAUSE_IMAGE % ver["KUBE_VERSION"],
                    runc=RUNC, cni_bin=bins["cni"], cni_conf=cni_dir, shim=bins["containerd-shim-runc-v2"]))

    write_if_changed(CONF / "kubelet.yaml", json.dumps({
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "address": NODE_IP, "port": 10250, "readOnlyPort": 0, "healthzBindAddress": "127.0.0.1", "healthzPort": 10248,
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": str(PKI / "ca.crt")}},
        "authorization": {"mode": "Webhook"},
        "tlsCertFile": str(PKI / "kubelet-serving.crt"), "tlsPrivateKeyFile": str(PKI / "kubelet-serving.key"),
        "containerRuntimeEndpoint": "unix://%s" % CONTAINERD_SOCK,
        # cgroup v1 host, no systemd: cgroupfs, and the kubelet must be told v1 is acceptable
        "cgroupDriver": "cgroupfs", "failCgroupV1": False, "failSwapOn": False,
        # the kubelet cannot lower its own oom_score_adj either (CAP_SYS_RESOURCE)
        "oomScoreAdj": 0,
        "clusterDNS": [NODE_IP], "clusterDomain": CLUSTER_DOMAIN, "resolvConf": "/etc/resolv.conf",
        # images come from `docker build` + load-images, never from a registry: never garbage-collect them
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99, "serializeImagePulls": False,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                         "nodefs.inodesFree": "1%"},
        "maxPods": 110, "podPidsLimit": -1,
        "shutdownGracePeriod": "0s", "shutdownGracePeriodCriticalPods": "0s",
        "rotateCertificates": False, "serverTLSBootstrap": False,
    }, indent=2) + "\n")

    write_if_changed(CONF / "kube-proxy.yaml", json.dumps({
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(CONF / "kube-proxy.kubeconfig")},
        "hostnameOverride": NODE, "mode": "iptables", "clusterCIDR": CLUSTER_CIDR,
        # NodePorts on the node's address and on 127.0.0.1 (so `ssh -p <nodePort> 127.0.0.1` works)
        "nodePortAddresses": ["%s/32" % NODE_IP, "127.0.0.1/32"],
        "iptables": {"localhostNodePorts": True, "masqueradeAll": False},
        # leave the host's conntrack table size and timeouts alone
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
        "healthzBindAddress": "127.0.0.1:10256", "metricsBindAddress": "127.0.0.1:10249",
    }, indent=2) + "\n")

    write_if_changed(CONF / "Corefile", textwrap.dedent("""\
        .:53 {{
            bind {node_ip}
            errors
            ready 127.0.0.1:18181
            kubernetes {domain} in-addr.arpa ip6.arpa {{
                kubeconfig {kubeconfig} hpc-localkube
                pods insecure
                fallthrough in-addr.arpa ip6.arpa
                ttl 5
            }}
            forward . /etc/resolv.conf
            loop
        }}
        """).format(node_ip=NODE_IP, domain=CLUSTER_DOMAIN, kubeconfig=CONF / "coredns.kubeconfig"))


# The add-ons' permissions and the default StorageClass, applied once the API answers.
ADDON_RBAC = [
    ("coredns", [{"apiGroups": [""], "resources": ["endpoints", "services", "pods", "namespaces"],
                  "verbs": ["list", "watch"]},
                 {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]}]),
    ("provisioner", [{"apiGroups": [""], "resources": ["persistentvolumes"],
                      "verbs": ["get", "list", "watch", "create", "delete", "patch", "update"]},
                     {"apiGroups": [""], "resources": ["persistentvolumeclaims"],
                      "verbs": ["get", "list", "watch", "update", "patch"]},
                     {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"], "verbs": ["get", "list", "watch"]},
                     {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "update", "patch"]},
                     {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]),
    ("kube-router", [{"apiGroups": [""], "resources": ["namespaces", "pods", "services", "nodes", "endpoints"],
                      "verbs": ["get", "list", "watch"]},
                     {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": ["get", "list", "watch"]},
                     {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["get", "list", "watch"]},
                     {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "update", "patch"]}]),
]


def addon_manifests() -> list[dict]:
    items: list[dict] = []
    for name, rules in ADDON_RBAC:
        role = "hpc-localkube:%s" % name
        items.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                      "metadata": {"name": role}, "rules": rules})
        items.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                      "metadata": {"name": role},
                      "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                      "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": role}]})
    items.append({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                  "metadata": {"name": "standard",
                               "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
                  "provisioner": PROVISIONER, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"})
    return items


# --- processes -----------------------------------------------------------------------------------------

@dataclass
class Component:
    name: str
    argv: list[str]
    ready: Callable[[], str | None]         # None when ready, else why not (shown on timeout)
    timeout: float = 60.0

    @property
    def log(self) -> Path:
        return LOGS / ("%s.log" % self.name)

    @property
    def pidfile(self) -> Path:
        return RUN / ("%s.pid" % self.name)

    def pid(self) -> int | None:
        try:
            pid = int(self.pidfile.read_text())
            os.kill(pid, 0)
            cmdline = Path("/proc/%d/cmdline" % pid).read_bytes().split(b"\0")[0].decode()
        except (OSError, ValueError):
            return None
        # a recycled pid is not ours: the command line must name our binary
        return pid if Path(cmdline).name == Path(self.argv[0]).name else None

    def start(self) -> bool:
        """Start unless running; True if it was started now."""
        if self.pid() is not None:
            return False
        argv = self.argv
        LOGS.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            log.write(("\n==== %s start: %s\n" % (time.strftime("%FT%T"), " ".join(argv))).encode())
            log.flush()
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, cwd=str(STATE))
        self.pidfile.write_text("%d\n" % proc.pid)
        self._proc = proc
        return True

    _proc: subprocess.Popen | None = None

    def exited(self) -> bool:
        # the child we started: poll() (its /proc cmdline is empty for a moment after the fork)
        return self._proc.poll() is not None if self._proc is not None else self.pid() is None

    def wait_ready(self) -> None:
        deadline = time.monotonic() + self.timeout
        why = "not checked"
        while time.monotonic() < deadline:
            if self.exited():
                raise LocalKubeError(self.name, "exited during start-up", self.log)
            why = self.ready()
            if why is None:
                return
            time.sleep(0.25)
        raise LocalKubeError(self.name, "not ready after %d s (%s)" % (self.timeout, why), self.log)

    def stop(self, grace: float = 15.0) -> None:
        pid = self.pid()
        if pid is None:
            self.pidfile.unlink(missing_ok=True)
            return
        os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and self.pid() is not None:
            time.sleep(0.1)
        if self.pid() is not None:
            os.killpg(pid, signal.SIGKILL)
            time.sleep(0.2)
        self.pidfile.unlink(missing_ok=True)


def _https(url: str, cert: str | None = "admin", verify: bool = True, timeout: float = 3.0) -> tuple[int, str]:
    ctx = ssl.create_default_context(cafile=str(PKI / "ca.crt")) if verify else ssl._create_unverified_context()
    if cert:
        ctx.load_cert_chain(str(PKI / ("%s.crt" % cert)), str(PKI / ("%s.key" % cert)))
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=timeout) as resp:
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")


def http_ok(url: str, **kwargs) -> str | None:
    try:
        if url.startswith("https:"):
            status, body = _https(url, **kwargs)
        else:
            with urllib.request.urlopen(url, timeout=3) as resp:
                status, body = resp.status, resp.read().decode(errors="replace")
    except (OSError, ssl.SSLError) as err:
        return "%s: %s" % (url, err)
    return None if status == 200 else "%s: HTTP %d %s" % (url, status, body.strip()[-300:])


def api_get(path: str) -> dict:
    status, body = _https("https://127.0.0.1:%d%s" % (API_PORT, path))
    if status != 200:
        raise LocalKubeError("kube-apiserver", "GET %s: HTTP %d %s" % (path, status, body[:300]))
    return json.loads(body)


def node_ready() -> str | None:
    try:
        node = api_get("/api/v1/nodes/%s" % NODE)
    except (LocalKubeError, OSError, ssl.SSLError) as err:
        return str(err)
    for cond in node.get("status", {}).get("conditions", []):
        if cond["type"] == "Ready":
            return None if cond["status"] == "True" else "node %s: %s" % (NODE, cond.get("message"))
    return "node %s has no Ready condition yet" % NODE


def sock_ok(path: Path) -> str | None:
    if not path.exists():
        return "%s does not exist" % path
    with socket.socket(socket.AF_UNIX) as sock:
        try:
            sock.connect(str(path))
        except OSError as err:
            return "%s: %s" % (path, err)
    return None


def cri_ok(crictl: Path) -> str | None:
    proc = run([str(crictl), "--runtime-endpoint", "unix://%s" % CONTAINERD_SOCK, "--timeout", "3s", "version"],
               check=False)
    return None if proc.returncode == 0 else "CRI: %s" % (proc.stderr or proc.stdout).strip()[-300:]


def kc(user: str) -> str:
    return str(CONF / ("%s.kubeconfig" % user))


def components(b: dict[str, Path]) -> list[Component]:
    return [
        Component("etcd", [
            str(b["etcd"]), "--name", NODE, "--data-dir", str(STATE / "etcd"),
            "--listen-client-urls", ETCD_CLIENT, "--advertise-client-urls", ETCD_CLIENT,
            "--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
            "--initial-cluster", "%s=http://127.0.0.1:2380" % NODE, "--listen-metrics-urls", "http://127.0.0.1:2381",
            "--log-level", "warn", "--quota-backend-bytes", str(4 << 30)],
            lambda: http_ok(ETCD_CLIENT + "/health")),
        Component("kube-apiserver", [
            str(b["kube-apiserver"]), "--etcd-servers", ETCD_CLIENT,
            # 0.0.0.0: kubeconfigs use 127.0.0.1, pods reach it on the node address (Service "kubernetes")
            "--bind-address", "0.0.0.0", "--secure-port", str(API_PORT), "--advertise-address", NODE_IP,
            "--tls-cert-file", str(PKI / "kube-apiserver.crt"), "--tls-private-key-file", str(PKI / "kube-apiserver.key"),
            "--client-ca-file", str(PKI / "ca.crt"),
            "--kubelet-client-certificate", str(PKI / "apiserver-kubelet-client.crt"),
            "--kubelet-client-key", str(PKI / "apiserver-kubelet-client.key"),
            "--kubelet-certificate-authority", str(PKI / "ca.crt"),
            "--kubelet-preferred-address-types", "InternalIP",
            "--service-account-issuer", "https://kubernetes.default.svc.%s" % CLUSTER_DOMAIN,
            "--service-account-key-file", str(PKI / "service-account.pub"),
            "--service-account-signing-key-file", str(PKI / "service-account.key"),
            "--service-cluster-ip-range", SERVICE_CIDR,
            "--authorization-mode", "Node,RBAC",
            "--enable-admission-plugins", "NodeRestriction,PodSecurity,NamespaceLifecycle,LimitRanger,"
            "ServiceAccount,DefaultStorageClass,DefaultTolerationSeconds,ResourceQuota,Priority,"
            "MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ValidatingAdmissionPolicy",
            "--allow-privileged=true",
            "--audit-policy-file", str(CONF / "audit-policy.yaml"), "--audit-log-path", str(AUDIT_LOG),
            "--audit-log-maxsize", "200", "--audit-log-maxbackup", "2",
            "--profiling=false", "--v", "1"],
            lambda: http_ok("https://127.0.0.1:%d/readyz" % API_PORT), timeout=90),
        Component("kube-controller-manager", [
            str(b["kube-controller-manager"]), "--kubeconfig", kc("kube-controller-manager"),
            "--authentication-kubeconfig", kc("kube-controller-manager"),
            "--authorization-kubeconfig", kc("kube-controller-manager"),
            "--bind-address", "127.0.0.1", "--leader-elect=false", "--use-service-account-credentials=true",
            "--service-account-private-key-file", str(PKI / "service-account.key"),
            "--root-ca-file", str(PKI / "ca.crt"),
            "--cluster-signing-cert-file", str(PKI / "ca.crt"), "--cluster-signing-key-file", str(PKI / "ca.key"),
            "--allocate-node-cidrs=true", "--cluster-cidr", CLUSTER_CIDR, "--node-cidr-mask-size", "24",
            "--service-cluster-ip-range", SERVICE_CIDR, "--v", "1"],
            lambda: http_ok("https://127.0.0.1:10257/healthz", cert=None, verify=False)),
        Component("kube-scheduler", [
            str(b["kube-scheduler"]), "--kubeconfig", kc("kube-scheduler"),
            "--authentication-kubeconfig", kc("kube-scheduler"), "--authorization-kubeconfig", kc("kube-scheduler"),
            "--bind-address", "127.0.0.1", "--leader-elect=false", "--v", "1"],
            lambda: http_ok("https://127.0.0.1:10259/healthz", cert=None, verify=False)),
        # the socket answers before the CRI plugin is initialized; a kubelet started then exits ("server is
        # not initialized yet"): ready once the CRI answers
        Component("containerd", [str(b["containerd"]), "--config", str(CONF / "containerd.toml")],
                  lambda: sock_ok(CONTAINERD_SOCK) or cri_ok(b["crictl"])),
        Component("kubelet", [
            str(b["kubelet"]), "--config", str(CONF / "kubelet.yaml"), "--kubeconfig", kc("kubelet"),
            "--hostname-override", NODE, "--node-ip", NODE_IP, "--root-dir", str(STATE / "kubelet"),
            "--v", "1"],
            # the Node's Ready condition can be left over from before a stop: the kubelet's own health first
            lambda: http_ok("http://127.0.0.1:10248/healthz") or node_ready(), timeout=90),
        Component("kube-proxy", [str(b["kube-proxy"]), "--config", str(CONF / "kube-proxy.yaml"), "--v", "1"],
                  lambda: http_ok("http://127.0.0.1:10256/healthz")),
        Component("coredns", [str(b["coredns"]), "-conf", str(CONF / "Corefile")],
                  lambda: http_ok("http://127.0.0.1:18181/ready")),
        Component("hostpath-provisioner", [
            str(b["hostpath-provisioner"]), "-kubeconfig", kc("provisioner"), "-root", str(STATE / "volumes"),
            "-provisioner-name", PROVISIONER, "-node-name", NODE],
            lambda: None),
        # NetworkPolicy only: pod networking is the bridge CNI's, Services are kube-proxy's
        Component("kube-router", [
            str(b["kube-router"]), "--kubeconfig", kc("kube-router"), "--hostname-override", NODE,
            "--run-firewall=true", "--run-router=false", "--run-service-proxy=false", "--enable-cni=false",
            "--enable-ipv6=false", "--metrics-port", "0", "--health-port", "20244",
            "--iptables-sync-period", "30s"],
            lambda: http_ok("http://127.0.0.1:20244/healthz")),
    ]


# --- host preparation ---------------------------------------------------------------------------------

def check_host() -> None:
    if os.geteuid() != 0:
        raise LocalKubeError("host", "must run as root (the kubelet, containerd and kube-proxy need it)")
    for tool in ("openssl", "iptables", "ip", "ipset", RUNC):
        if not shutil.which(tool):
            raise LocalKubeError("host", "%s is missing (make deps installs it)" % tool)
    if not Path("/sys/fs/cgroup/memory").is_dir() and not Path("/sys/fs/cgroup/cgroup.controllers").exists():
        raise LocalKubeError("host", "no cgroup hierarchy with the memory controller under /sys/fs/cgroup")


def ports_in_use_by_others(mine: set[int]) -> None:
    """Fail early, naming the port, when something else already listens where a component will."""
    wanted = {2379: "etcd", 2380: "etcd", API_PORT: "kube-apiserver", 10257: "kube-controller-manager",
              10259: "kube-scheduler", 10250: "kubelet", 10248: "kubelet", 10256: "kube-proxy",
              18181: "coredns", 20244: "kube-router"}
    out = run(["ss", "-Hltnp"], check=False).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        port = int(parts[3].rsplit(":", 1)[-1]) if parts[3].rsplit(":", 1)[-1].isdigit() else 0
        if port in wanted and wanted[port] not in mine:
            raise LocalKubeError(wanted[port], "port %d is already in use by another program: %s" % (port, line.strip()))


def network_up() -> None:
    """The bridge (node address = pod gateway), forwarding, and the accept rules Docker's DROP policy needs."""
    if run(["ip", "link", "show", BRIDGE], check=False).returncode != 0:
        run(["ip", "link", "add", BRIDGE, "type", "bridge"])
    addrs = run(["ip", "-o", "-4", "addr", "show", "dev", BRIDGE]).stdout
    if " %s/" % NODE_IP not in addrs:
        run(["ip", "addr", "add", "%s/24" % NODE_IP, "dev", BRIDGE])
    run(["ip", "link", "set", BRIDGE, "up"])
    Path("/proc/sys/net/ipv4/ip_forward").write_text("1\n")
    Path("/proc/sys/net/bridge/bridge-nf-call-iptables").write_text("1\n")
    # Docker sets FORWARD's policy to DROP; pod traffic on the bridge must pass. Appended, so that
    # kube-router's NetworkPolicy chain (inserted first in FORWARD) decides before this accepts.
    if run(["iptables", "-w", "-n", "-L", FORWARD_CHAIN], check=False).returncode != 0:
        run(["iptables", "-w", "-N", FORWARD_CHAIN])
        run(["iptables", "-w", "-A", FORWARD_CHAIN, "-i", BRIDGE, "-j", "ACCEPT"])
        run(["iptables", "-w", "-A", FORWARD_CHAIN, "-o", BRIDGE, "-j", "ACCEPT"])
    if run(["iptables", "-w", "-C", "FORWARD", "-j", FORWARD_CHAIN], check=False).returncode != 0:
        run(["iptables", "-w", "-A", "FORWARD", "-j", FORWARD_CHAIN])


def network_down() -> None:
    run(["ip", "link", "del", BRIDGE], check=False)


OUR_CHAINS = ("KUBE-", "LOCALKUBE-", "CNI-")


def remove_iptables_rules() -> None:
    """Every rule and chain that the kubelet, kube-proxy, kube-router, the CNI plugins and we made (their
    chains are named KUBE-*, CNI-*, LOCALKUBE-*), then kube-router's ipsets; Docker's rules stay."""
    for table in ("filter", "nat", "mangle", "raw"):
        dump = run(["iptables-save", "-t", table], check=False).stdout.splitlines()
        chains = [line[1:].split()[0] for line in dump if line.startswith(":") and line[1:].startswith(OUR_CHAINS)]
        for line in dump:
            # jumps into our chains from the built-in (or Docker's) chains
            if line.startswith("-A ") and not line.split()[1].startswith(OUR_CHAINS) and \
                    any(" %s" % chain in line for chain in chains):
                run(["iptables", "-w", "-t", table, "-D"] + shlex.split(line)[1:], check=False)
        for chain in chains:
            run(["iptables", "-w", "-t", table, "-F", chain], check=False)
        for chain in chains:
            run(["iptables", "-w", "-t", table, "-X", chain], check=False)
    for name in run(["ipset", "list", "-n"], check=False).stdout.split():
        if name.startswith(("KUBE-", "kube-router")):
            run(["ipset", "destroy", name], check=False)


def kubectl(bins: dict[str, Path], *args: str, **kwargs) -> subprocess.CompletedProcess:
    return run([str(bins["kubectl"]), "--kubeconfig", str(KUBECONFIG), *args], **kwargs)


def import_pause(bins: dict[str, Path], ver: dict[str, str]) -> None:
    """The sandbox image, made from the pause binary build.sh compiled (no registry)."""
    name = PAUSE_IMAGE % ver["KUBE_VERSION"]
    ctr = [str(bins["ctr"]), "--address", str(CONTAINERD_SOCK), "-n", "k8s.io"]
    if name in run(ctr + ["images", "ls", "-q"]).stdout.split():
        return
    with tempfile.TemporaryDirectory() as tmp:
        tar = Path(tmp) / "pause.tar"
        _oci_image_tar(bins["pause"], name, tar)
        run(ctr + ["images", "import", "--no-unpack=false", str(tar)])


def _oci_image_tar(binary: Path, name: str, out: Path) -> None:
    """A one-layer OCI image archive holding /pause, without Docker (docker may not be running)."""
    def blob(data: bytes) -> tuple[str, int]:
        return "sha256:" + hashlib.sha256(data).hexdigest(), len(data)

    layer_raw = io.BytesIO()
    with tarfile.open(fileobj=layer_raw, mode="w") as layer:
        info = tarfile.TarInfo("pause")
        info.size, info.mode, info.mtime = binary.stat().st_size, 0o755, 0
        with open(binary, "rb") as fh:
            layer.addfile(info, fh)
    diff_id = "sha256:" + hashlib.sha256(layer_raw.getvalue()).hexdigest()
    layer_gz = gzip.compress(layer_raw.getvalue(), mtime=0)
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "config": {"Entrypoint": ["/pause"], "User": "65535:65535"},
                         "rootfs": {"type": "layers", "diff_ids": [diff_id]}}).encode()
    (cfg_digest, cfg_size), (layer_digest, layer_size) = blob(config), blob(layer_gz)
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                      "digest": cfg_digest, "size": cfg_size},
                           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                                       "digest": layer_digest, "size": layer_size}]}).encode()
    man_digest, man_size = blob(manifest)
    index = json.dumps({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": man_digest, "size": man_size,
        "annotations": {"io.containerd.image.name": name, "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1]},
        "platform": {"architecture": "amd64", "os": "linux"}}]}).encode()
    with tarfile.open(out, "w") as tar:
        for path, data in [("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'), ("index.json", index)] + [
                ("blobs/sha256/" + d.split(":")[1], b) for d, b in
                [(cfg_digest, config), (layer_digest, layer_gz), (man_digest, manifest)]]:
            info = tarfile.TarInfo(path)
            info.size, info.mtime = len(data), 0
            tar.addfile(info, io.BytesIO(data))


# --- commands -------------------------------------------------------------------------------------------

def cmd_start(_args) -> None:
    started_at = time.monotonic()
    check_host()
    bins, ver = binaries(), versions()
    for directory in (STATE, LOGS, RUN, STATE / "volumes"):
        directory.mkdir(parents=True, exist_ok=True)
    comps = components(bins)
    running = {c.name for c in comps if c.pid() is not None}
    ports_in_use_by_others(running)
    ensure_pki(running=bool(running))
    write_configs(bins, ver)
    network_up()
    for comp in comps:
        fresh = comp.start()
        comp.wait_ready()
        if comp.name == "kube-apiserver":
            apply_addons(bins)
        if comp.name == "containerd":
            import_pause(bins, ver)
        say("%-24s %s" % (comp.name, "started" if fresh else "already running"))
    wait_cluster_usable(bins)
    say("cluster ready in %.1f s; export KUBECONFIG=%s" % (time.monotonic() - started_at, KUBECONFIG))


def apply_addons(bins: dict[str, Path]) -> None:
    deadline = time.monotonic() + 60
    while True:
        proc = kubectl(bins, "apply", "--server-side", "--field-manager", "hpc-localkube", "-f", "-",
                       input=json.dumps({"apiVersion": "v1", "kind": "List", "items": addon_manifests()}), check=False)
        if proc.returncode == 0:
            return
        if time.monotonic() > deadline:
            raise LocalKubeError("kube-apiserver", "applying the add-ons' RBAC and StorageClass failed: %s"
                                 % proc.stderr.strip(), LOGS / "kube-apiserver.log")
        time.sleep(1)


def wait_cluster_usable(bins: dict[str, Path]) -> None:
    """What a user's first apply needs: the default ServiceAccount (made by the controller manager)."""
    deadline = time.monotonic() + 60
    while kubectl(bins, "get", "serviceaccount", "default", "-n", "default", check=False).returncode != 0:
        if time.monotonic() > deadline:
            raise LocalKubeError("kube-controller-manager", "no default ServiceAccount after 60 s",
                                 LOGS / "kube-controller-manager.log")
        time.sleep(0.5)


def cmd_stop(_args) -> None:
    bins = binaries(required=False)
    by_name = {c.name: c for c in components(bins)}
    # add-ons and the node first, so that nothing recreates what the next steps remove
    for name in ("kube-router", "hostpath-provisioner", "coredns", "kube-proxy", "kubelet"):
        by_name[name].stop()
    if by_name["containerd"].pid() is not None:
        remove_pods(bins)
    by_name["containerd"].stop(grace=20)
    kill_leftover_shims()
    for name in ("kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"):
        by_name[name].stop()
    remove_iptables_rules()
    unmount_under(STATE)
    network_down()
    say("stopped; nothing of the cluster runs (state kept in %s; `purge` removes it)" % STATE)


def remove_pods(bins: dict[str, Path]) -> None:
    crictl = [str(bins["crictl"]), "--runtime-endpoint", "unix://%s" % CONTAINERD_SOCK, "--timeout", "30s"]
    pods = run(crictl + ["pods", "-q"], check=False).stdout.split()
    if pods:
        run(crictl + ["stopp"] + pods, check=False)
        run(crictl + ["rmp", "-f"] + pods, check=False)


def kill_leftover_shims() -> None:
    """Shims (and their containers) that outlived containerd, e.g. after a crash: only ours."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmd and cmd[0].endswith(b"containerd-shim-runc-v2") and str(CONTAINERD_SOCK).encode() in b" ".join(cmd):
            try:
                os.killpg(int(proc.name), signal.SIGKILL)
            except OSError:
                pass


def unmount_under(root: Path) -> None:
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    for mount in sorted((m for m in mounts if m.startswith(str(root) + "/") or m.startswith(str(RUN) + "/")),
                        key=len, reverse=True):
        run(["umount", "-l", mount], check=False)


def cmd_purge(args) -> None:
    cmd_stop(args)
    for path in (STATE, RUN):
        if path.exists():
            shutil.rmtree(path)
    say("removed %s and %s" % (STATE, RUN))


def cmd_status(_args) -> None:
    down = 0
    for comp in components(binaries(required=False)):
        pid = comp.pid()
        why = comp.ready() if pid else "not running"
        down += why is not None
        print("%-24s %-8s %s" % (comp.name, pid or "-", "ready" if why is None else why))
    sys.exit(1 if down else 0)


def cmd_env(_args) -> None:
    bins = binaries()
    print("export KUBECONFIG=%s" % KUBECONFIG)
    print("export PATH=%s:$PATH" % bins["kubectl"].parent)


def cmd_load_images(args) -> None:
    """docker image -> containerd's k8s.io namespace, unless containerd already has that image ID: under the
    same name nothing is done, under another name (the same build tagged for another test module) containerd
    tags it, which costs no copy (a `docker save | ctr import` of the Slurm images takes tens of seconds of
    CPU, and the T3 tier is CPU-bound)."""
    bins = binaries()
    crictl = [str(bins["crictl"]), "--runtime-endpoint", "unix://%s" % CONTAINERD_SOCK]
    ctr = [str(bins["ctr"]), "--address", str(CONTAINERD_SOCK), "-n", "k8s.io"]
    if sock_ok(CONTAINERD_SOCK) is not None:
        raise LocalKubeError("containerd", "not running: start the cluster first (localkube.py start)")
    names_of = {image["id"]: image.get("repoTags") or []
                for image in json.loads(run(crictl + ["images", "-o", "json"]).stdout).get("images", [])}
    for image in args.images:
        ident = run([DOCKER, "image", "inspect", "-f", "{{.Id}}", image], check=False)
        if ident.returncode != 0:
            raise LocalKubeError("load-images", "the Docker engine has no image %s (build it first)" % image)
        ident = ident.stdout.strip()
        full = image if "/" in image.split(":")[0] and "." in image.split("/")[0] else "docker.io/" + image
        if full in names_of.get(ident, []):
            say("%s: already in containerd" % image)
            continue
        if names_of.get(ident):
            tagged = run(ctr + ["images", "tag", "--force", names_of[ident][0], full], check=False)
            if tagged.returncode != 0:
                raise LocalKubeError("load-images", "tagging %s as %s failed: %s"
                                     % (names_of[ident][0], full, tagged.stderr.strip()))
            say("%s: tagged in containerd (the same image as %s)" % (image, names_of[ident][0]))
            continue
        start = time.monotonic()
        save = subprocess.Popen([DOCKER, "save", image], stdout=subprocess.PIPE)
        imp = subprocess.run(ctr + ["images", "import", "--digests", "-"], stdin=save.stdout,
                             capture_output=True, text=True, check=False)
        save.wait()
        if save.returncode != 0 or imp.returncode != 0:
            raise LocalKubeError("load-images", "importing %s failed: %s" % (image, imp.stderr.strip()))
        say("%s: imported in %.1f s" % (image, time.monotonic() - start))


@contextlib.contextmanager
def _users_gone(wait: bool):
    """For stop and purge: hold LOCALKUBE_USERS_LOCK exclusively, waiting (and saying so) while a user of
    the cluster holds it. Taken before the command lock, so that the waiting users can still `start` and
    `load-images`; nothing for the other commands or without the variable."""
    path = os.environ.get("LOCALKUBE_USERS_LOCK")
    if not wait or not path:
        yield
        return
    with open(path, "a", encoding="ascii") as users:
        try:
            fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say("waiting until the users of the cluster end (they hold %s)" % path)
            started = time.monotonic()
            fcntl.flock(users, fcntl.LOCK_EX)
            say("the users ended after %.0f s" % (time.monotonic() - started))
        yield


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, func in (("start", cmd_start), ("stop", cmd_stop), ("purge", cmd_purge), ("status", cmd_status),
                       ("env", cmd_env)):
        sub.add_parser(name).set_defaults(func=func)
    load = sub.add_parser("load-images")
    load.add_argument("images", nargs="+")
    load.set_defaults(func=cmd_load_images)
    args = parser.parse_args(argv)
    try:
        with _users_gone(args.command in ("stop", "purge")):
            # one command at a time (parallel test workers all run `start`): the others wait for it
            RUN.mkdir(parents=True, exist_ok=True)
            with open(RUN / "lock", "w") as lock:
                if args.command != "status":
                    fcntl.flock(lock, fcntl.LOCK_EX)
                args.func(args)
    except LocalKubeError as err:
        print(err.report(), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
