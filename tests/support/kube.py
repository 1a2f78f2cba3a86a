"""The local Kubernetes of tests/localkube, for the tests that run the collection on it (tests/k8s,
molecule, benchmarks): kubectl, exec into pods, image loading, the API server's audit log."""

from __future__ import annotations

import json
import os
import sys

from .proc import ROOT, collection_version, run, wait_for

sys.path.insert(0, str(ROOT / "tests" / "localkube"))
import localkube  # noqa: E402  pylint: disable=wrong-import-position

LOCALKUBE = [sys.executable, str(ROOT / "tests" / "localkube" / "localkube.py")]
BUILD_IMAGES = ROOT / "tests" / "images" / "build-images.sh"
KUBECONFIG = localkube.KUBECONFIG
IMAGE_PREFIX = "hpc-slurm-k8s"
SLURM_MAJORS = ROOT / "images" / "slurm" / "slurm-majors"


def slurm_majors():
    """images/slurm/slurm-majors as {major: Debian suite}, in its order (the first is the default)."""
    return dict(line.split() for line in SLURM_MAJORS.read_text().splitlines() if line.strip() and not line.startswith("#"))


def default_slurm_major():
    """The Slurm major of the images built without an explicit one: SLURM_MAJOR's, else slurm-majors' first
    (as build-images.sh)."""
    return os.environ.get("SLURM_MAJOR") or next(iter(slurm_majors()))


def images_of(tag, portal=False):
    names = ("slurm", "slurm-daemon", "mariadb-test") + (("slurm-notebook", "slurm-portal") if portal else ())
    return ["%s/%s:%s" % (IMAGE_PREFIX, name, tag) for name in names]


def shared_tag(major):
    """The tag of the build the test modules share for a Slurm major: the collection's version (the tag of
    `make up` and Molecule) for slurm-majors' first, `<version>-slurm<major>` for another."""
    version = collection_version()
    return version if major == next(iter(slurm_majors())) else "%s-slurm%s" % (version, major)


class Kube:
    """kubectl and friends against the running local cluster (start it with `localkube.py start`)."""

    def __init__(self):
        self.bins = localkube.binaries()
        self.kubeconfig = KUBECONFIG
        # the kubernetes.core.kubectl connection plugin runs `kubectl` from PATH; ansible-playbook and
        # the collections are the checkout's (make deps), also when a benchmark is started by hand
        self.env = dict(os.environ, KUBECONFIG=str(KUBECONFIG),
                        PATH="%s:%s:%s" % (self.bins["kubectl"].parent, ROOT / ".venv" / "bin", os.environ.get("PATH", "")))
        self.env.setdefault("ANSIBLE_COLLECTIONS_PATH", str(ROOT / ".cache" / "collections"))
        self.env.setdefault("ANSIBLE_COLLECTIONS_SCAN_SYS_PATH", "false")

    # --- commands -----------------------------------------------------------------------------------
    def kubectl(self, *args, check=True, timeout=180, **kwargs):
        return run([self.bins["kubectl"], *args], env=self.env, check=check, timeout=timeout, **kwargs)

    def get(self, kind, name=None, namespace=None, selector=None, check=True):
        argv = ["get", kind] + ([name] if name else []) + (["-n", namespace] if namespace else [])
        argv += (["-l", selector] if selector else []) + ["-o", "json"]
        proc = self.kubectl(*argv, check=check)
        if proc.returncode != 0:
            return None
        return json.loads(proc.stdout)

    def exec(self, namespace, pod, *command, container=None, check=True, timeout=120, **kwargs):
        argv = ["exec", "-i", "-n", namespace, pod] + (["-c", container] if container else []) + ["--", *command]
        return self.kubectl(*argv, check=check, timeout=timeout, **kwargs)

    def pods(self, namespace, selector=None):
        return {pod["metadata"]["name"]: pod for pod in self.get("pods", namespace=namespace, selector=selector)["items"]}

    @staticmethod
    def is_ready(pod):
        return any(c["type"] == "Ready" and c["status"] == "True" for c in pod.get("status", {}).get("conditions", []))

    def replace_pod(self, namespace, name, timeout=240):
        """Delete a controller's pod and wait for its successor (same name, another uid) to be Ready.

        `kubectl delete --wait` returns once the old pod is gone, before the controller has created
        the new one: waiting on the name right away can find no pod at all."""
        uid = self.get("pod", name, namespace)["metadata"]["uid"]
        self.kubectl("delete", "pod", name, "-n", namespace, "--wait=true", "--timeout=%ds" % timeout,
                     timeout=timeout + 30)

        def successor_ready():
            pod = self.get("pod", name, namespace, check=False) or {}
            return pod.get("metadata", {}).get("uid", uid) != uid and self.is_ready(pod)
        wait_for(successor_ready, timeout, "the controller's new pod %s/%s to be Ready" % (namespace, name))

    def pod_identity(self, namespace):
        """name -> (uid, restart count): changes when a pod is replaced or its container restarted."""
        return {name: (pod["metadata"]["uid"],
                       sum(c.get("restartCount", 0) for c in pod["status"].get("containerStatuses", [])))
                for name, pod in self.pods(namespace).items()}

    def delete_namespace(self, namespace, timeout=300):
        """Remove a test's namespace, volumes included. Its pods go first without grace: a namespace
        deletion stops slurmctld and the slurmd pods at once, and each preStop hook would then wait
        for the slurmctld that is gone (teardown.yml is what stops a cluster in order). Their controllers
        go before them, leaving the pods behind (orphan): otherwise each StatefulSet makes its pods again
        at once, and those run their preStop hooks through the whole grace period (about two minutes of
        each test module's teardown here)."""
        self.kubectl("delete", "statefulsets,deployments", "--all", "-n", namespace, "--cascade=orphan",
                     "--wait=true", check=False)
        self.kubectl("delete", "pods", "--all", "-n", namespace, "--grace-period=0", "--force", "--wait=false",
                     check=False)
        self.kubectl("delete", "namespace", namespace, "--ignore-not-found", "--wait=true",
                     "--timeout=%ds" % timeout, timeout=timeout + 30)
        # released volumes of the deleted claims are removed by the provisioner (reclaim policy Delete)
        wait_for(lambda: not [pv for pv in self.get("pv")["items"]
                              if (pv["spec"].get("claimRef") or {}).get("namespace") == namespace],
                 120, "the volumes of namespace %s to be deleted" % namespace)

    # --- images ---------------------------------------------------------------------------------------
    def build_and_load_images(self, tag, slurm_major=None, portal=False, own_build=False):
        """The images under `tag` (of `slurm_major`, else SLURM_MAJOR's or the default, as build-images.sh; with
        `portal` the portal's two as well), in Docker and in containerd.

        A test module's tag is the shared build of the collection's version (shared_tag()) tagged again: one
        image ID for every module, so that containerd tags it instead of copying it once per module
        (load-images). `own_build`: a build of its own whose version label is `tag`, for a test that needs
        images that differ (test_day2's upgrades between builds of one Slurm major)."""
        major = slurm_major or default_slurm_major()
        env = dict(os.environ, SLURM_MAJOR=major, **({"PORTAL": "1"} if portal else {}))
        if own_build:
            run(["bash", BUILD_IMAGES, tag], timeout=1800, env=env)
        else:
            shared = shared_tag(major)
            run(["bash", BUILD_IMAGES, shared], timeout=1800, env=env)
            for source, target in zip(images_of(shared, portal), images_of(tag, portal)):
                run(["docker", "tag", source, target])
        run(LOCALKUBE + ["load-images", *images_of(tag, portal)], timeout=900)

    def image_id(self, ref):
        """The image ID (config digest) the kubelet reports for `ref` (containerd's name)."""
        full = ref if ref.count("/") >= 2 else "docker.io/" + ref
        out = run([self.bins["crictl"], "--runtime-endpoint", "unix://%s" % localkube.CONTAINERD_SOCK,
                   "inspecti", "-o", "json", full]).stdout
        return json.loads(out)["status"]["id"]

    # --- audit log ------------------------------------------------------------------------------------
    @staticmethod
    def audit_position():
        return localkube.AUDIT_LOG.stat().st_size

    @staticmethod
    def writes_since(position, namespace, user="kubernetes-admin"):
        """The write requests `user` made in `namespace` (or to that Namespace object) since
        audit_position() returned `position` (other tests may write elsewhere meanwhile). Server-side
        dry runs (check mode) persist nothing and are not counted."""
        with open(localkube.AUDIT_LOG, "rb") as log:
            log.seek(position)
            events = [json.loads(line) for line in log.read().splitlines() if line.strip()]
        return [e for e in events if e["user"]["username"] == user and e.get("stage") == "ResponseComplete"
                and "dryRun=" not in e.get("requestURI", "")
                and (e.get("objectRef", {}).get("namespace") == namespace
                     or (e.get("objectRef", {}).get("resource"), e.get("objectRef", {}).get("name")) == ("namespaces", namespace))]


def start_cluster():
    """localkube.py start (idempotent); a cluster that cannot start fails the tier, it never skips."""
    proc = run(LOCALKUBE + ["start"], check=False, timeout=600)
    if proc.returncode != 0:
        raise AssertionError("the local Kubernetes did not start:\n%s\n%s" % (proc.stdout[-3000:], proc.stderr[-4000:]))
    return Kube()
