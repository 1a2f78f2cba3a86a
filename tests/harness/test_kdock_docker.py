"""Docker-backed tests of kdock: apply tests/harness/fixtures/ and the Kubernetes behaviours around it.

Skipped when Docker is unavailable, except in CI (CI=true), where that is a failure.
The fixtures use image kdock-test:latest; when it is missing it is built from the host's static
busybox (apt-get install busybox-static) with `docker import` (no pull needed).  The fixture
directory itself only needs sh, sleep, cat, touch, hostname (busybox or Debian images both work);
the extra test below also uses busybox's httpd and wget.
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
KDOCK = [sys.executable, os.path.join(HERE, "kdock.py")]
FIXTURES = os.path.join(HERE, "fixtures")
DOCKER = "/usr/bin/docker"
IMAGE = "kdock-test:latest"
IN_CI = os.environ.get("CI", "").lower() == "true"


def _docker_ok() -> bool:
    try:
        return subprocess.run([DOCKER, "info"], capture_output=True, timeout=30, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _ensure_image() -> None:
    if subprocess.run([DOCKER, "image", "inspect", IMAGE], capture_output=True, check=False).returncode == 0:
        return
    busybox = shutil.which("busybox") or "/bin/busybox"
    if not os.path.exists(busybox):
        raise RuntimeError(f"{IMAGE} is missing and there is no busybox to build it (apt-get install busybox-static)")
    root = tempfile.mkdtemp()
    try:
        for d in ("bin", "etc", "tmp", "root"):
            os.makedirs(os.path.join(root, d))
        os.chmod(os.path.join(root, "tmp"), 0o1777)
        shutil.copy2(busybox, os.path.join(root, "bin", "busybox"))
        applets = subprocess.run([busybox, "--list"], capture_output=True, text=True, check=True).stdout.split()
        for a in applets:
            if a != "busybox":
                os.symlink("busybox", os.path.join(root, "bin", a))
        os.symlink("bin", os.path.join(root, "sbin"))
        os.makedirs(os.path.join(root, "usr"))
        os.symlink("../bin", os.path.join(root, "usr", "bin"))
        with open(os.path.join(root, "etc", "passwd"), "w") as fh:
            fh.write("root:x:0:0:root:/root:/bin/sh\n")
        with open(os.path.join(root, "etc", "group"), "w") as fh:
            fh.write("root:x:0:\n")
        tar = subprocess.run(["tar", "-C", root, "-c", "."], capture_output=True, check=True).stdout
        subprocess.run([DOCKER, "import", "-c", 'CMD ["/bin/sh"]', "-c", "ENV PATH=/bin:/usr/bin:/sbin",
                        "-", IMAGE], input=tar, capture_output=True, check=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def docker_ready():
    if not _docker_ok():
        if IN_CI:
            pytest.fail("docker is not available but CI=true: the kdock Docker tests must run in CI")
        pytest.skip("docker is not available")
    _ensure_image()


@pytest.fixture
def env(tmp_path, docker_ready):
    prefix = f"kt{os.getpid()}{int(time.time()) % 10000}-"
    state = tmp_path / "state"
    e = dict(os.environ, KDOCK_STATE_DIR=str(state))
    namespaces = []

    def kd(*args, check=True, timeout=120):
        p = subprocess.run(KDOCK + list(args), capture_output=True, text=True, env=e, timeout=timeout, check=False)
        if check and p.returncode != 0:
            raise AssertionError(f"kdock {' '.join(args)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
        return p

    kd.prefix = prefix
    kd.namespaces = namespaces
    yield kd
    for ns in namespaces:
        kd("delete", "--namespace", ns, "--volumes", check=False)


def docker(*args):
    return subprocess.run([DOCKER, *args], capture_output=True, text=True, check=False)


def cid(name):
    p = docker("inspect", "-f", "{{.Id}}", name)
    return p.stdout.strip() if p.returncode == 0 else None


def sh(kd, ns, pod, script):
    return kd("exec", ns, pod, "--", "sh", "-c", script).stdout


def test_fixture_lifecycle(env, tmp_path):
    kd = env
    t0 = time.time()
    d = tmp_path / "manifests"
    shutil.copytree(FIXTURES, d)
    ns = f"{kd.prefix}kdt"
    kd.namespaces.append(ns)

    # 1. first apply: init containers, OrderedReady creation, readiness
    out = kd("apply", str(d), "--namespace-prefix", kd.prefix, "--wait", "--timeout", "60").stdout
    assert f"created pod {ns}/web-0" in out and f"created pod {ns}/web-1" in out
    assert out.index(f"created pod {ns}/web-0") < out.index(f"created pod {ns}/web-1")
    assert "ignored (no Docker equivalent)" in out and "ServiceAccount/web" in out
    assert kd("container-name", ns, "web-1").stdout.strip() == f"{ns}_web-1"
    ids = {p: cid(f"{ns}_{p}") for p in ("web-0", "web-1")}
    assert all(ids.values())
    assert sh(kd, ns, "web-0", "hostname").strip() == "web-0"
    assert sh(kd, ns, "web-1", "hostname -f").strip() == "web-1.web.kdt.svc.cluster.local"
    # resolution by <pod>.<svc>, FQDN, and the Service name
    res = sh(kd, ns, "web-0", "for n in web-1.web web-1.web.kdt.svc.cluster.local web; do "
             "(getent hosts $n || nslookup $n) >/dev/null 2>&1 && echo ok-$n; done")
    assert res.split() == ["ok-web-1.web", "ok-web-1.web.kdt.svc.cluster.local", "ok-web"]
    # env: fieldRef + $(VAR) + secretKeyRef + resourceFieldRef; init container ran; $$ escape
    assert sh(kd, ns, "web-1", "cat /data/env").split() == ["web-1", "s3cret", "64", "1"]
    assert sh(kd, ns, "web-0", "cat /shared/init-web-0 /shared/init-web-1 /data/escaped").split() == \
        ["init", "web-0", "init", "web-1", "$(POD_NAME)"]
    assert sh(kd, ns, "web-0", "cat /etc/web/greeting; echo; readlink /etc/web/greeting").split() == \
        ["hello", "..data/greeting"]
    status = kd("status", ns).stdout
    assert "web-0" in status and "yes" in status

    # 2. unchanged re-apply does nothing
    out = kd("apply", str(d), "--namespace-prefix", kd.prefix, "--wait", "--timeout", "60").stdout
    assert f"unchanged pod {ns}/web-0" in out and f"unchanged pod {ns}/web-1" in out
    assert not [ln for ln in out.splitlines() if ln.startswith(("created pod", "recreated pod"))]
    assert {p: cid(f"{ns}_{p}") for p in ids} == ids

    # 3. ConfigMap change propagates into the running containers without recreation
    cm = d / "10-config-0.yaml"
    cm.write_text(cm.read_text().replace("greeting: hello", "greeting: bonjour"))
    out = kd("apply", str(d), "--namespace-prefix", kd.prefix, "--timeout", "60").stdout
    assert "configured configmap" in out and "recreated pod" not in out
    assert {p: cid(f"{ns}_{p}") for p in ids} == ids
    assert sh(kd, ns, "web-1", "cat /etc/web/greeting").strip() == "bonjour"
    assert sh(kd, ns, "web-0", "ls -a /etc/web | grep -c '^\\.\\.20'").strip() == "1"

    # 4. spec change: recreated highest ordinal first, preStop ran, volumes kept
    sts = d / "20-statefulset.yaml"
    sts.write_text(sts.read_text().replace('checksum/spec: "1"', 'checksum/spec: "2"'))
    out = kd("apply", str(d), "--namespace-prefix", kd.prefix, "--wait", "--timeout", "60").stdout
    assert out.index(f"recreated pod {ns}/web-1") < out.index(f"recreated pod {ns}/web-0")
    new_ids = {p: cid(f"{ns}_{p}") for p in ids}
    assert all(new_ids[p] and new_ids[p] != ids[p] for p in ids)
    assert sh(kd, ns, "web-0", "cat /shared/prestop-web-0 /shared/prestop-web-1").split() == ["stopped"] * 2
    assert sh(kd, ns, "web-0", "cat /data/env").split()[0] == "web-0"  # volumeClaimTemplate data kept

    # 5. StatefulSet removed from DIR: containers go, volumes stay
    sts.unlink()
    out = kd("apply", str(d), "--namespace-prefix", kd.prefix, "--timeout", "60").stdout
    assert f"deleted pod {ns}/web-1" in out and f"deleted pod {ns}/web-0" in out
    assert cid(f"{ns}_web-0") is None and cid(f"{ns}_web-1") is None
    vols = set(docker("volume", "ls", "-q", "--filter", f"label=kdock.namespace={ns}").stdout.split())
    assert vols == {f"kdock-{ns}-shared", f"kdock-{ns}-data-web-0", f"kdock-{ns}-data-web-1"}

    # 6. delete --volumes cleans everything up
    kd("delete", "--namespace", ns, "--volumes")
    assert docker("ps", "-aq", "--filter", f"label=kdock.namespace={ns}").stdout.strip() == ""
    assert docker("volume", "ls", "-q", "--filter", f"label=kdock.namespace={ns}").stdout.strip() == ""
    assert docker("network", "inspect", f"kdock-{ns}").returncode != 0
    assert time.time() - t0 < 60


EXTRA = """
apiVersion: v1
kind: ConfigMap
metadata: {name: cm, namespace: kx}
data: {A: "1", file.txt: "content"}
---
apiVersion: v1
kind: Service
metadata: {name: front, namespace: kx}
spec:
  type: NodePort
  selector: {app: front}
  ports: [{port: 8080, targetPort: http, nodePort: NODEPORT}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: front, namespace: kx}
spec:
  replicas: 2
  selector: {matchLabels: {app: front}}
  template:
    metadata: {labels: {app: front}}
    spec:
      hostNetwork: true
      terminationGracePeriodSeconds: 1
      containers:
        - name: httpd
          image: kdock-test:latest
          command: ["sh", "-c", "mkdir -p /www && echo hi-$(POD) > /www/index.html && exec httpd -f -p 8080 -h /www"]
          env: [{name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]
          envFrom: [{configMapRef: {name: cm}, prefix: CM_}]
          ports: [{name: http, containerPort: 8080}]
          securityContext: {privileged: true, capabilities: {add: [NET_ADMIN]}}
          readinessProbe: {httpGet: {path: /, port: http}, periodSeconds: 1}
          volumeMounts: [{name: scratch, mountPath: /scratch}]
        - name: side
          image: kdock-test:latest
          command: ["sh", "-c", "trap 'exit 0' TERM; echo side > /scratch/side; while :; do sleep 1; done"]
          readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
          volumeMounts: [{name: scratch, mountPath: /scratch}, {name: cm, mountPath: /cm/f, subPath: file.txt}]
      volumes:
        - {name: scratch, emptyDir: {}}
        - {name: cm, configMap: {name: cm}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: once, namespace: kx}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
        - {name: job, image: kdock-test:latest, command: ["sh", "-c", "echo JOBOUT; exit CODE"]}
"""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_deployment_job_nodeport_sidecar(env, tmp_path):
    kd = env
    ns = f"{kd.prefix}kx"
    kd.namespaces.append(ns)
    port = _free_port()
    d = tmp_path / "m"
    d.mkdir()
    (d / "all.yaml").write_text(EXTRA.replace("NODEPORT", str(port)).replace("CODE", "0"))
    out = kd("apply", str(d), "--namespace-prefix", kd.prefix, "--wait", "--timeout", "60").stdout
    assert "hostNetwork: true dropped" in out and "privileged: true dropped" in out
    assert f"completed job {ns}/once" in out
    pods = sorted(set(docker("ps", "--filter", "label=kdock.owner=Deployment/front", "--filter",
                             f"label=kdock.namespace={ns}", "--format", '{{.Label "kdock.name"}}').stdout.split()))
    assert len(pods) == 2
    # NodePort: published on 127.0.0.1 of the first matching pod (sorted by name)
    import urllib.request
    assert urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read().decode().strip() == f"hi-{pods[0]}"
    caps = docker("inspect", "-f", "{{json .HostConfig.CapAdd}} {{.HostConfig.Privileged}}", f"{ns}_{pods[0]}")
    assert caps.stdout.split() == ['["NET_ADMIN"]', "false"]
    # sidecar shares network (localhost:8080) and emptyDir with the main container; subPath file
    side = kd("exec", ns, pods[0], "-c", "side", "--", "sh", "-c",
              "wget -qO- http://127.0.0.1:8080/; cat /scratch/side /cm/f").stdout.split()
    assert side == [f"hi-{pods[0]}", "side", "content"]
    assert kd("exec", ns, pods[1], "--", "sh", "-c", "echo $CM_A").stdout.strip() == "1"
    assert "JOBOUT" in kd("logs", ns, "once").stdout
    # re-apply: job not re-run, deployment unchanged
    out = kd("apply", str(d), "--namespace-prefix", kd.prefix, "--timeout", "60").stdout
    assert "unchanged job" in out and not [ln for ln in out.splitlines() if ln.startswith("created pod")]
    # a failing job (spec changed) fails apply with its output
    (d / "all.yaml").write_text(EXTRA.replace("NODEPORT", str(port)).replace("CODE", "3"))
    p = kd("apply", str(d), "--namespace-prefix", kd.prefix, "--timeout", "60", check=False)
    assert p.returncode != 0 and "job" in p.stderr and "JOBOUT" in p.stderr
    # a bad manifest is rejected before any action
    (d / "bad.yaml").write_text("kind: Pod\nmetadata: {name: x}\n")
    p = kd("apply", str(d), "--namespace-prefix", kd.prefix, check=False)
    assert p.returncode != 0 and "missing apiVersion" in p.stderr and p.stdout == ""


def test_readiness_timeout_names_pod_and_probe_output(env, tmp_path):
    kd = env
    ns = f"{kd.prefix}kr"
    kd.namespaces.append(ns)
    (tmp_path / "p.yaml").write_text("""
apiVersion: v1
kind: Pod
metadata: {name: slow, namespace: kr}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: c
      image: kdock-test:latest
      command: ["sleep", "1000"]
      readinessProbe: {exec: {command: ["sh", "-c", "echo not-yet-ready; false"]}, periodSeconds: 1}
""")
    p = kd("apply", str(tmp_path), "--namespace-prefix", kd.prefix, "--wait", "--timeout", "4", check=False)
    assert p.returncode != 0
    assert f"pod {ns}/slow" in p.stderr and "not-yet-ready" in p.stderr
