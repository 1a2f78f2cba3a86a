"""Unit tests of kdock's pure parts (no Docker needed)."""
import os
import stat
import sys
from fractions import Fraction

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kdock  # noqa: E402
from kdock import KdockError  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def write(tmp_path, name, text):
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


# ---------------------------------------------------------------- manifests

def test_load_multi_document_recursive_and_empty_docs(tmp_path):
    write(tmp_path, "b.yaml", "---\n# only a comment\n---\napiVersion: v1\nkind: ConfigMap\n"
                              "metadata: {name: b, namespace: n}\n---\n")
    write(tmp_path, "sub/a.yml", "apiVersion: v1\nkind: Secret\nmetadata: {name: a}\n")
    write(tmp_path, "ignored.txt", "not yaml: [")
    objs = kdock.load_manifests(str(tmp_path))
    assert [(o.kind, o.namespace, o.name) for o in objs] == [("ConfigMap", "n", "b"), ("Secret", "default", "a")]


def test_load_list_and_cluster_scoped(tmp_path):
    write(tmp_path, "l.yaml", "apiVersion: v1\nkind: List\nitems:\n"
                              "- {apiVersion: v1, kind: Namespace, metadata: {name: x}}\n"
                              "- {apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, metadata: {name: r}}\n")
    objs = kdock.load_manifests(str(tmp_path))
    assert [(o.kind, o.namespace) for o in objs] == [("Namespace", "x"), ("ClusterRole", "")]


@pytest.mark.parametrize("text,msg", [
    ("kind: Pod\nmetadata: {name: x}\n", "missing apiVersion"),
    ("apiVersion: v1\nmetadata: {name: x}\n", "missing kind"),
    ("apiVersion: v1\nkind: Pod\nmetadata: {}\n", "missing metadata.name"),
    ("- a\n- b\n", "not a mapping"),
    ("apiVersion: v1\nkind: Pod\nmetadata: {name: [\n", "invalid YAML"),
])
def test_load_bad_manifests(tmp_path, text, msg):
    write(tmp_path, "bad.yaml", text)
    with pytest.raises(KdockError, match=msg):
        kdock.load_manifests(str(tmp_path))


def test_load_duplicate(tmp_path):
    doc = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"
    write(tmp_path, "a.yaml", doc + "---\n" + doc)
    with pytest.raises(KdockError, match="duplicate ConfigMap default/c"):
        kdock.load_manifests(str(tmp_path))


def test_fixture_dir_parses():
    kinds = sorted(o.kind for o in kdock.load_manifests(FIXTURES))
    assert kinds == ["ConfigMap", "Namespace", "PersistentVolumeClaim", "Secret", "Service",
                     "ServiceAccount", "StatefulSet"]


# ---------------------------------------------------------------- quantities, downward API

@pytest.mark.parametrize("q,v", [
    ("500m", Fraction(1, 2)), ("2", 2), (2, 2), (0.5, Fraction(1, 2)), ("1Gi", 2**30), ("64Mi", 64 * 2**20),
    ("100M", 10**8), ("1k", 1000), ("1e3", 1000), ("1.5Gi", 3 * 2**29), ("1E", 10**18), ("250u", Fraction(1, 4000)),
])
def test_parse_quantity(q, v):
    assert kdock.parse_quantity(q) == v


@pytest.mark.parametrize("q", ["", "abc", "1.2.3", "5mi", True])
def test_parse_quantity_invalid(q):
    with pytest.raises(KdockError):
        kdock.parse_quantity(q)


C = {"name": "c", "resources": {"limits": {"cpu": "250m", "memory": "100M"}, "requests": {"cpu": "100m"}}}
NODE = {"cpu": Fraction(8), "memory": Fraction(16 * 2**30), "ephemeral-storage": Fraction(0)}


@pytest.mark.parametrize("ref,want", [
    ({"resource": "limits.cpu"}, "1"),                          # rounds up to whole cores
    ({"resource": "limits.cpu", "divisor": "1m"}, "250"),
    ({"resource": "requests.cpu", "divisor": "1m"}, "100"),
    ({"resource": "limits.memory"}, "100000000"),
    ({"resource": "limits.memory", "divisor": "1Mi"}, "96"),    # 95.37 -> 96
    ({"resource": "requests.memory", "divisor": "1M"}, "100"),  # requests default to limits
    ({"resource": "limits.cpu", "divisor": "1", "containerName": "other"}, "8"),  # node allocatable
    ({"resource": "requests.memory", "containerName": "other"}, "0"),
])
def test_resource_field_ref(ref, want):
    other = {"name": "other"}
    assert kdock.resource_field_value(ref, [C, other], C, NODE) == want


def test_resource_field_ref_errors():
    with pytest.raises(KdockError, match="no container"):
        kdock.resource_field_value({"resource": "limits.cpu", "containerName": "x"}, [C], C, NODE)
    with pytest.raises(KdockError, match="unsupported resource"):
        kdock.resource_field_value({"resource": "limits.gpu"}, [C], C, NODE)


@pytest.mark.parametrize("s,want", [
    ("$(A)", "a"), ("x$(A)y$(B)z", "xaybz"), ("$(MISSING)", "$(MISSING)"), ("$$(A)", "$(A)"),
    ("$$$(A)", "$a"), ("$$", "$"), ("$", "$"), ("a$", "a$"), ("$(A", "$(A"), ("$A", "$A"),
    ("$()", "$()"), ("$(A)$(A)", "aa"), ("no vars", "no vars"), ("$$$$(A)", "$$(A)"),
])
def test_expand_vars(s, want):
    assert kdock.expand_vars(s, {"A": "a", "B": "b"}) == want


def pod_info(**kw):
    spec = kw.pop("spec", {"containers": [C], "serviceAccountName": "sa"})
    return kdock.PodInfo("web-0", "slurm", {"app": "web"}, {"note": "n"}, spec)


@pytest.mark.parametrize("path,want", [
    ("metadata.name", "web-0"), ("metadata.namespace", "slurm"), ("metadata.labels['app']", "web"),
    ("metadata.labels['nope']", ""), ("metadata.annotations['note']", "n"), ("spec.nodeName", "kdock"),
    ("spec.serviceAccountName", "sa"), ("status.podIP", None),
])
def test_field_ref(path, want):
    assert kdock.field_ref_value(path, pod_info()) == want


def test_field_ref_unsupported():
    with pytest.raises(KdockError, match="not supported"):
        kdock.field_ref_value("spec.bogus", pod_info())


def store():
    objs = kdock.load_manifests(FIXTURES)
    s = kdock.Store(objs)
    s.configmaps["extra"] = {"X": b"1", "Y": b"2", "bad name": b"3"}
    return s


def test_build_env_order_refs_and_expansion():
    c = {
        "name": "c", "resources": C["resources"],
        "envFrom": [{"configMapRef": {"name": "extra"}, "prefix": "P_"},
                    {"secretRef": {"name": "missing", "optional": True}}],
        "env": [
            {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "URL", "value": "http://$(NAME):$(P_X)/$$(NAME)/$(UNDEF)"},
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "web-secret", "key": "token"}}},
            {"name": "GREET", "valueFrom": {"configMapKeyRef": {"name": "web-config", "key": "greeting"}}},
            {"name": "OPT", "valueFrom": {"configMapKeyRef": {"name": "web-config", "key": "no", "optional": True}}},
            {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1M"}}},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "P_X", "value": "override"},
            {"name": "BOOL", "value": True},
        ]}
    notes = []
    env = kdock.build_env(c, pod_info(spec={"containers": [c]}), store(), notes)
    assert env == {"P_X": "override", "P_Y": "2", "NAME": "web-0", "URL": "http://web-0:1/$(NAME)/$(UNDEF)",
                   "TOKEN": "s3cret", "GREET": "hello", "MEM": "100", "BOOL": "true"}
    assert list(env)[:2] == ["P_X", "P_Y"]
    assert any("status.podIP" in n for n in notes) and any("bad name" in n for n in notes)


@pytest.mark.parametrize("entry,msg", [
    ({"name": "A", "valueFrom": {"secretKeyRef": {"name": "web-secret", "key": "nope"}}}, "key 'nope' not found"),
    ({"name": "A", "valueFrom": {"configMapKeyRef": {"name": "gone", "key": "k"}}}, "ConfigMap 'gone' not found"),
    ({"name": "A", "valueFrom": {"weird": {}}}, "unsupported valueFrom"),
])
def test_build_env_errors(entry, msg):
    c = {"name": "c", "env": [entry]}
    with pytest.raises(KdockError, match=msg):
        kdock.build_env(c, pod_info(spec={"containers": [c]}), store())


def test_envfrom_missing_not_optional():
    c = {"name": "c", "envFrom": [{"secretRef": {"name": "gone"}}]}
    with pytest.raises(KdockError, match="envFrom Secret 'gone'"):
        kdock.build_env(c, pod_info(spec={"containers": [c]}), store())


@pytest.mark.parametrize("c,want", [
    ({"command": ["sh", "-c", "echo $(A)"]}, ("sh", ["-c", "echo a"])),
    ({"command": ["run"], "args": ["$(A)", "$$(A)"]}, ("run", ["a", "$(A)"])),
    ({"args": ["slurmd", "-D"]}, (None, ["slurmd", "-D"])),
    ({}, (None, [])),
])
def test_command_line(c, want):
    assert kdock.command_line(c, {"A": "a"}) == want


# ---------------------------------------------------------------- hashes and plans

TEMPLATE = {"metadata": {"labels": {"app": "web"}, "annotations": {"checksum/config": "1"}},
            "spec": {"containers": [{"name": "c", "image": "img:1", "env": [{"name": "A", "value": "1"}]}]}}


def test_template_hash_stable_and_sensitive():
    h = kdock.template_hash("StatefulSet", TEMPLATE, {"img:1": "sha256:aa"})
    reordered = {"spec": TEMPLATE["spec"], "metadata": {"annotations": {"checksum/config": "1"},
                                                        "labels": {"app": "web"}}}
    assert kdock.template_hash("StatefulSet", reordered, {"img:1": "sha256:aa"}) == h
    assert len(h) == 64
    changed = {"metadata": {"labels": {"app": "web"}, "annotations": {"checksum/config": "2"}},
               "spec": TEMPLATE["spec"]}
    assert kdock.template_hash("StatefulSet", changed, {"img:1": "sha256:aa"}) != h
    assert kdock.template_hash("StatefulSet", TEMPLATE, {"img:1": "sha256:bb"}) != h  # rebuilt tag


def plan_fixture(tmp_path=None, mutate=None):
    objs = kdock.load_manifests(FIXTURES)
    if mutate:
        mutate(objs)
    ns = kdock.NsPlan("kdt", "t-")
    ns.objs = [o for o in objs if o.namespace == "kdt"]
    ns.store = kdock.Store(ns.objs)
    ns.workloads = [o for o in ns.objs if o.kind in kdock.WORKLOAD_KINDS]
    for o in ns.workloads:
        ns.pods += kdock.plan_workload(ns, o, lambda img: "sha256:" + img)
    kdock.finish_plans(ns)
    return ns


def test_statefulset_plan():
    ns = plan_fixture()
    assert ns.ens == "t-kdt" and ns.network == "kdock-t-kdt"
    assert [p.name for p in ns.pods] == ["web-0", "web-1"]
    p0, p1 = ns.pods
    assert p0.main_name == "t-kdt_web-0"
    assert p0.claim_volumes == {"data": "kdock-t-kdt-data-web-0"}
    assert p1.claim_volumes == {"data": "kdock-t-kdt-data-web-1"}
    assert p0.aliases == ["web-0", "web-0.web", "web-0.web.kdt", "web-0.web.kdt.svc",
                          "web-0.web.kdt.svc.cluster.local", "web", "web.kdt", "web.kdt.svc",
                          "web.kdt.svc.cluster.local"]
    assert p0.hash == p1.hash  # same template, no per-pod ports
    assert p0.envs["main"]["TOKEN"] == "s3cret" and p0.envs["main"]["MEM_MI"] == "64"
    assert p0.envs["main"]["CPU"] == "1" and p1.envs["init"]["POD_NAME"] == "web-1"
    files = p0.volume_files["config"]
    assert files["greeting"] == (b"hello", 0o440)


def test_configmap_change_does_not_change_hash_but_annotation_does():
    base = plan_fixture().pods[0].hash

    def cm(objs):
        next(o for o in objs if o.kind == "ConfigMap").body["data"]["greeting"] = "bye"

    def ann(objs):
        sts = next(o for o in objs if o.kind == "StatefulSet")
        sts.body["spec"]["template"]["metadata"]["annotations"]["checksum/spec"] = "2"
    changed_cm = plan_fixture(mutate=cm).pods[0]
    assert changed_cm.hash == base and changed_cm.volume_files["config"]["greeting"][0] == b"bye"
    assert plan_fixture(mutate=ann).pods[0].hash != base


def test_deployment_nodeport_plan():
    objs = kdock.load_manifests(FIXTURES)
    ns = kdock.NsPlan("kdt", "")
    dep = kdock.Obj({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "front", "namespace": "kdt"},
                     "spec": {"replicas": 2, "template": {
                         "metadata": {"labels": {"app": "front"}},
                         "spec": {"containers": [{"name": "h", "image": "i", "ports": [
                             {"name": "http", "containerPort": 8080}]}]}}}}, "mem", 0)
    svc = kdock.Obj({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "front", "namespace": "kdt"},
                     "spec": {"type": "NodePort", "selector": {"app": "front"},
                              "ports": [{"port": 80, "targetPort": "http", "nodePort": 30080},
                                        {"port": 81, "protocol": "UDP"}]}}, "mem", 1)
    ns.objs = [o for o in objs if o.namespace == "kdt"] + [dep, svc]
    ns.store = kdock.Store(ns.objs)
    ns.pods = kdock.plan_workload(ns, dep, lambda img: "sha256:x")
    kdock.finish_plans(ns)
    h = ns.pods[0].template_hash[:10]
    assert [p.name for p in ns.pods] == [f"front-{h}-0", f"front-{h}-1"]
    assert ns.pods[0].ports == [(30080, 8080, "tcp"), (81, 81, "udp")]  # first matching pod only
    assert ns.pods[1].ports == [] and ns.pods[0].hash != ns.pods[1].hash
    assert "front.kdt.svc.cluster.local" in ns.pods[1].aliases


def test_plan_rejects_missing_pvc_and_bad_mount():
    def drop_pvc(objs):
        objs[:] = [o for o in objs if o.kind != "PersistentVolumeClaim"]
    with pytest.raises(KdockError, match="PersistentVolumeClaim 'shared' is not in the manifests"):
        plan_fixture(mutate=drop_pvc)

    def bad_mount(objs):
        sts = next(o for o in objs if o.kind == "StatefulSet")
        sts.body["spec"]["template"]["spec"]["containers"][0]["volumeMounts"].append({"name": "x", "mountPath": "/x"})
    with pytest.raises(KdockError, match="volumeMount 'x' names no volume"):
        plan_fixture(mutate=bad_mount)


# ---------------------------------------------------------------- projected files / atomic writer

def test_projected_files_items_modes_optional():
    s = store()
    info = pod_info()
    vol = {"name": "v", "configMap": {"name": "web-config", "defaultMode": 0o600,
                                      "items": [{"key": "greeting", "path": "sub/g.txt", "mode": 0o400},
                                                {"key": "app.conf", "path": "app.conf"}]}}
    assert kdock.projected_files(vol, info, s) == {"sub/g.txt": (b"hello", 0o400), "app.conf": (b"mode=test\n", 0o600)}
    assert kdock.projected_files({"name": "v", "secret": {"secretName": "nope", "optional": True}}, info, s) == {}
    with pytest.raises(KdockError, match="not found"):
        kdock.projected_files({"name": "v", "secret": {"secretName": "nope"}}, info, s)
    proj = {"name": "p", "projected": {"sources": [
        {"configMap": {"name": "web-config", "items": [{"key": "greeting", "path": "g"}]}},
        {"secret": {"name": "web-secret"}},
        {"downwardAPI": {"items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}}]}}
    assert kdock.projected_files(proj, info, s) == {"g": (b"hello", 0o644), "token": (b"s3cret", 0o644),
                                                    "name": (b"web-0", 0o644)}
    assert kdock.projected_files({"name": "e", "emptyDir": {}}, info, s) is None
    with pytest.raises(KdockError, match="invalid path"):
        kdock.projected_files({"name": "v", "configMap": {"name": "web-config", "items": [
            {"key": "greeting", "path": "../x"}]}}, info, s)


def test_atomic_write_layout_and_update(tmp_path):
    t = str(tmp_path / "vol")
    assert kdock.atomic_write_dir(t, {"a": (b"1", 0o644), "d/b": (b"2", 0o400)})
    entries = sorted(os.listdir(t))
    stamp = [e for e in entries if e.startswith("..") and e not in ("..data",)]
    assert len(stamp) == 1 and stamp[0].startswith("..20")
    assert os.readlink(os.path.join(t, "..data")) == stamp[0]
    assert os.readlink(os.path.join(t, "a")) == "..data/a"
    assert os.readlink(os.path.join(t, "d")) == "..data/d"
    assert open(os.path.join(t, "d", "b")).read() == "2"
    assert stat.S_IMODE(os.stat(os.path.join(t, "d", "b")).st_mode) == 0o400
    ino = os.stat(t).st_ino
    # unchanged content: no-op
    assert not kdock.atomic_write_dir(t, {"a": (b"1", 0o644), "d/b": (b"2", 0o400)})
    # a mode change alone is a change
    assert kdock.atomic_write_dir(t, {"a": (b"1", 0o600), "d/b": (b"2", 0o400)})
    # update: new content, key removed, key added, same directory, old stamp dir gone
    fh = open(os.path.join(t, "a"))  # an open reader keeps the old content
    assert kdock.atomic_write_dir(t, {"a": (b"new", 0o644), "c": (b"3", 0o644)})
    assert fh.read() == "1"
    assert os.stat(t).st_ino == ino
    assert open(os.path.join(t, "a")).read() == "new"
    assert not os.path.lexists(os.path.join(t, "d"))
    assert os.readlink(os.path.join(t, "c")) == "..data/c"
    stamps = [e for e in os.listdir(t) if e.startswith("..") and e != "..data"]
    assert len(stamps) == 1 and stamps[0] != stamp[0]
    assert not os.path.lexists(os.path.join(t, "..data_tmp"))


# ---------------------------------------------------------------- CLI parsing

def test_cli_parsing():
    a = kdock.parse_args(["exec", "ns", "pod", "-c", "side", "--", "sh", "-c", "echo -c"])
    assert (a.command, a.ns, a.pod, a.container, a.argv) == ("exec", "ns", "pod", "side", ["sh", "-c", "echo -c"])
    a = kdock.parse_args(["apply", "d", "--namespace-prefix", "t-", "--wait", "--timeout", "20"])
    assert (a.dir, a.namespace_prefix, a.wait, a.timeout) == ("d", "t-", True, 20.0)
    a = kdock.parse_args(["delete", "--namespace", "x", "--volumes"])
    assert (a.namespace, a.volumes) == ("x", True)
    assert kdock.parse_args(["status"]).ns is None
    assert kdock.parse_args(["container-name", "n", "p"]).pod == "p"


def test_emptied_namespace_directory_is_planned_only_when_applied_before(tmp_path, monkeypatch):
    monkeypatch.setattr(kdock, "STATE_ROOT", str(tmp_path / "state"))
    root = tmp_path / "render"
    write(root, "live/configmap-a.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: live}\n")
    (root / "torn-down").mkdir()
    (root / "never-applied").mkdir()
    kdock.save_state("t-torn-down", {"objects": {"ConfigMap/a": "x"}})
    spaces = kdock.Applier(str(root), "t-", wait=False, timeout=1).plan()
    assert [(ns.kns, len(ns.objs), ns.pods) for ns in spaces] == [("live", 1, []), ("torn-down", 0, [])]
