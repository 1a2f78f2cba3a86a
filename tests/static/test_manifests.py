"""Checks of the rendered manifests of every value set (tests/static/values/*.yml).

Schemas (kubernetes-validate --strict, offline, Kubernetes 1.29 to the newest it ships), the
security baseline (checkov; Pod Security "baseline"; probes and resources; PodDisruptionBudgets;
NetworkPolicies; RBAC; no secret outside Secrets), and restart semantics (checksum annotations).
The burst pods of power saving (roles/powersave) are checked as workloads too: no manifest file holds
them, so conftest builds them with slurm-k8s-power itself from the rendered ConfigMap slurm-power.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, VALUE_SETS, VARIANT_USERS, VERBOSE_SETS, load_values, secret_values

OLDEST_KUBERNETES = (1, 29)
WORKLOAD_KINDS = ("StatefulSet", "Deployment", "DaemonSet", "Job", "Pod")
# Pod Security Standards, "baseline": capabilities a container may add.
BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                         "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
# ConfigMaps whose change the pods pick up without a restart (slurm.conf & co: scontrol reconfigure;
# slurm-power: the power-save program reads its configuration, pod templates and the cluster CA
# (kube-root-ca.crt) at every call).
# slurm-users: the pods read passwd, group and the keys at each lookup (libnss-extrausers, sshd's
# AuthorizedKeysCommand).
# (auth/slurm's key set: re-read at each step of a rotation, by reconfigure, SIGHUP to sackd, slurmdbd's restart)
HOT_RELOADED = {("ConfigMap", "slurm-config"), ("ConfigMap", "slurm-power"), ("ConfigMap", "kube-root-ca.crt"),
                ("ConfigMap", "slurm-users"), ("Secret", "slurm-auth-key")}
# workload -> objects it reads only when its volume is empty: no checksum (a restart would change nothing;
# MariaDB's passwords change by ALTER USER, secrets_rotation)
READ_AT_INITIALISATION = {"mariadb": {("Secret", "slurm-database")}}
# checksum annotation -> the object it tracks
CHECKSUM_OF = {"munge-key": ("Secret", "munge-key"), "ssh-host-keys": ("Secret", "ssh-host-keys"),
               "slurmdbd-conf": ("Secret", "slurmdbd-config"),
               "slurm-database": ("Secret", "slurm-database"), "jwt-key": ("Secret", "slurm-jwt-key"),
               "slurm-conf": ("ConfigMap", "slurm-config"), "portal-config": ("ConfigMap", "portal"),
               "portal": ("Secret", "portal"), "portal-passwords": ("Secret", "portal-passwords")}
# Workloads that read slurm.conf at start only (no scontrol reconfigure reaches them): slurmrestd.
RESTARTED_BY_SLURM_CONF = {("Deployment", "slurmrestd")}


def pod_template(doc):
    """metadata and spec of the pods of a workload (a Pod is its own template)."""
    return doc if doc["kind"] == "Pod" else doc["spec"]["template"]


def containers(doc):
    spec = pod_template(doc)["spec"]
    return spec.get("initContainers", []) + spec["containers"]


def workloads(run):
    return run.by_kind(*WORKLOAD_KINDS) + run.burst_pods()


def power_groups(value_set):
    """(name, count) of each power-save group of a value set."""
    return [(g["name"], int(g["count"])) for g in load_values(value_set).get("powersave_groups") or []]


def kubernetes_versions():
    from kubernetes_validate import utils  # pylint: disable=import-outside-toplevel
    versions = sorted({tuple(int(x) for x in v.split(".")[:2]) for v in utils.all_versions()})
    return ["%d.%d.0" % v for v in versions if v >= OLDEST_KUBERNETES]


# --- schemas -------------------------------------------------------------------------------------

@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_manifests_match_the_kubernetes_schemas_strictly(renders, value_set):
    from kubernetes_validate import utils  # pylint: disable=import-outside-toplevel
    versions = kubernetes_versions()
    assert versions[0] == "1.29.0" and len(versions) >= 2, versions
    errors = []
    docs = renders[value_set].docs()
    assert len(docs) >= 15, sorted(docs)
    docs.update({"burst pod %s" % pod["metadata"]["name"]: pod for pod in renders[value_set].burst_pods()})
    assert len(renders[value_set].burst_pods()) == len(power_groups(value_set))
    for version in versions:
        for path, doc in docs.items():
            if (doc["apiVersion"], doc["kind"]) in CRD_SCHEMAS:
                continue
            try:
                utils.validate(doc, version, strict=True)
            except (utils.ValidationError, utils.SchemaNotFoundError) as exc:
                errors.append("%s (Kubernetes %s): %s" % (path, version, getattr(exc, "message", exc)))
    # the kinds of an operator: the schema of its CustomResourceDefinition, with unknown fields refused (the API
    # server would drop them silently)
    for path, doc in docs.items():
        schema = CRD_SCHEMAS.get((doc["apiVersion"], doc["kind"]))
        if schema is not None:
            errors += ["%s: %s" % (path, error) for error in crd_errors(doc, schema)]
    assert not errors, "\n".join(errors[:40])


def _crd_schemas():
    """(apiVersion, kind) -> openAPIV3Schema of the CustomResourceDefinitions in tests/support/crds."""
    schemas = {}
    for crd_file in sorted((ROOT / "tests" / "support" / "crds").glob("*.yaml")):
        crd = yaml.safe_load(crd_file.read_text())
        for version in crd["spec"]["versions"]:
            schemas[("%s/%s" % (crd["spec"]["group"], version["name"]), crd["spec"]["names"]["kind"])] = \
                version["schema"]["openAPIV3Schema"]
    return schemas


CRD_SCHEMAS = _crd_schemas()


def crd_errors(doc, schema):
    """What the schema of a CustomResourceDefinition refuses in `doc`, and the fields it does not know."""
    import jsonschema  # pylint: disable=import-outside-toplevel
    errors = ["%s: %s" % ("/".join(map(str, e.absolute_path)), e.message)
              for e in jsonschema.Draft4Validator(schema).iter_errors(doc)]

    def unknown(node, node_schema, where):
        if isinstance(node, dict) and node_schema.get("type") == "object" and "properties" in node_schema:
            for key, value in node.items():
                if key not in node_schema["properties"]:
                    if not node_schema.get("x-kubernetes-preserve-unknown-fields"):
                        errors.append("%s/%s: unknown field" % (where, key))
                else:
                    unknown(value, node_schema["properties"][key], "%s/%s" % (where, key))
        elif isinstance(node, list) and "items" in node_schema:
            for index, item in enumerate(node):
                unknown(item, node_schema["items"], "%s[%d]" % (where, index))
    unknown({k: v for k, v in doc.items() if k not in ("apiVersion", "kind", "metadata")}, schema, "")
    return errors


def test_crd_schema_check_refuses_a_misspelled_field():
    monitor = {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor", "metadata": {"name": "m"},
               "spec": {"selector": {"matchLabels": {"a": "b"}}, "endpoints": [{"port": "metrics", "path": "/metrics/jobs"}]}}
    schema = CRD_SCHEMAS[("monitoring.coreos.com/v1", "ServiceMonitor")]
    assert crd_errors(monitor, schema) == []
    monitor["spec"]["endpoints"][0]["intervall"] = "30s"
    monitor["spec"]["endpoints"].append({"port": "metrics", "scheme": "gopher"})
    errors = crd_errors(monitor, schema)
    assert any("/spec/endpoints[0]/intervall: unknown field" in e for e in errors), errors
    assert any("gopher" in e for e in errors), errors


def test_strict_validation_rejects_a_misspelled_field(renders):
    from kubernetes_validate import utils  # pylint: disable=import-outside-toplevel
    good = renders["defaults"].get("StatefulSet", "slurmctld")
    utils.validate(good, "1.29.0", strict=True)
    for path in (("spec", "template", "spec", "containers", 0, "readinessProbee"),
                 ("spec", "template", "spec", "containers", 0, "securityContext", "allowPrivilegeEscalaton"),
                 ("spec", "serviceNam")):
        bad = copy.deepcopy(good)
        node = bad
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = True
        with pytest.raises(utils.ValidationError):
            utils.validate(bad, "1.29.0", strict=True)
        # without --strict the typo would pass: that is why CI validates strictly
        utils.validate(bad, "1.29.0", strict=False)


# --- checkov ---------------------------------------------------------------------------------------

def checkov_binary():
    for candidate in (os.environ.get("CHECKOV"), str(ROOT / ".venv-checkov" / "bin" / "checkov"), shutil.which("checkov")):
        if candidate and Path(candidate).is_file():
            return candidate
    message = "checkov not found (make deps installs it in .venv-checkov; or set CHECKOV)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)
    return None


def test_checkov_finds_nothing_unexplained(renders, tmp_path):
    checkov = checkov_binary()
    for name, run in renders.items():
        shutil.copytree(run.render_dir, tmp_path / name)
        for pod in run.burst_pods():
            (tmp_path / name / ("burst-pod-%s.yaml" % pod["metadata"]["name"])).write_text(yaml.safe_dump(pod))
    proc = subprocess.run([checkov, "-d", str(tmp_path), "--framework", "kubernetes", "--quiet", "--compact",
                           "-o", "json"], capture_output=True, text=True, timeout=600, check=False)
    report = json.loads(proc.stdout)
    report = report[0] if isinstance(report, list) else report
    results = report.get("results", {})
    failed = ["%s %s %s" % (c["check_id"], c["resource"], c["file_path"]) for c in results.get("failed_checks", [])]
    assert not failed, "checkov findings without a justified skip:\n" + "\n".join(failed)
    assert report["summary"]["passed"] > 100, report["summary"]
    unexplained = ["%s %s" % (c["check_id"], c["resource"]) for c in results.get("skipped_checks", [])
                   if len((c.get("check_result") or {}).get("suppress_comment") or "") < 20]
    assert not unexplained, "skips without a reason: %s" % unexplained


# --- security baseline ---------------------------------------------------------------------------

def baseline_violations(doc):
    """Pod Security Standards "baseline" violations of one workload."""
    spec = pod_template(doc)["spec"]
    found = [field for field in ("hostNetwork", "hostPID", "hostIPC") if spec.get(field)]
    found += ["hostPath volume %s" % v["name"] for v in spec.get("volumes", []) if "hostPath" in v]
    if (spec.get("securityContext") or {}).get("seccompProfile", {}).get("type") == "Unconfined":
        found.append("seccomp Unconfined")
    for c in containers(doc):
        sec = c.get("securityContext") or {}
        if sec.get("privileged"):
            found.append("%s: privileged" % c["name"])
        extra = set((sec.get("capabilities") or {}).get("add") or []) - BASELINE_CAPABILITIES
        if extra:
            found.append("%s: capabilities %s" % (c["name"], sorted(extra)))
        found += ["%s: hostPort %s" % (c["name"], p["hostPort"]) for p in c.get("ports", []) if p.get("hostPort")]
        if sec.get("procMount", "Default") != "Default" or (sec.get("seccompProfile") or {}).get("type") == "Unconfined":
            found.append("%s: procMount/seccomp" % c["name"])
    return found


# What the API server accepts (apimachinery validation.IsQualifiedName / IsValidLabelValue); the
# schemas above do not check keys: a prefix must be a DNS subdomain (no "_").
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def _qualified_name_errors(key):
    prefix, _sep, name = key.rpartition("/")
    errors = []
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        errors.append("prefix %r is not a DNS subdomain" % prefix)
    if len(name) > 63 or not _NAME.match(name):
        errors.append("name %r is not a qualified name" % name)
    return errors


def _metadata_maps(doc):
    """(where, kind of map, dict) of every label/annotation/selector map of a manifest."""
    found = []

    def walk(node, path):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("labels", "annotations", "matchLabels", "nodeSelector") and isinstance(value, dict):
                    found.append(("%s.%s" % (path, key), key, value))
                walk(value, "%s.%s" % (path, key))
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, "%s[%d]" % (path, index))
    walk(doc, "%s/%s" % (doc["kind"], doc["metadata"]["name"]))
    return found


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_label_and_annotation_keys_are_valid_for_the_api_server(renders, value_set):
    problems = []
    for doc in list(renders[value_set].docs().values()) + renders[value_set].burst_pods():
        for where, kind, mapping in _metadata_maps(doc):
            for key, value in mapping.items():
                problems += ["%s %r: %s" % (where, key, error) for error in _qualified_name_errors(key)]
                if kind != "annotations" and value != "" and (len(str(value)) > 63 or not _NAME.match(str(value))):
                    problems.append("%s %r: value %r is not a valid label value" % (where, key, value))
    assert not problems, "\n".join(problems)


def test_label_key_check_rejects_an_underscore_prefix():
    assert _qualified_name_errors("hpc.slurm_k8s/checksum-users")
    assert not _qualified_name_errors("hpc.slurm-k8s/checksum-users")
    assert not _qualified_name_errors("app.kubernetes.io/name")


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_pods_meet_pod_security_baseline(renders, value_set):
    values = load_values(value_set)
    exempt = set()
    if values.get("slurmd_privileged") or values.get("slurmd_host_network"):
        exempt.add("slurmd")        # requested explicitly
    if values.get("storage_mode") == "nfs":
        exempt.add("nfs-server")    # development-only in-cluster NFS server: kernel nfsd needs privileges
    problems = {}
    for doc in workloads(renders[value_set]):
        name = doc["metadata"]["name"]
        violations = baseline_violations(doc)
        if violations and name not in exempt:
            problems[name] = violations
        if name not in exempt:
            # beyond baseline: RuntimeDefault seccomp, no escalation, capabilities dropped
            assert pod_template(doc)["spec"]["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", name
            for c in containers(doc):
                assert c["securityContext"]["allowPrivilegeEscalation"] is False, (name, c["name"])
                assert c["securityContext"]["capabilities"]["drop"] == ["ALL"], (name, c["name"])
    assert not problems, problems
    if "slurmd" in exempt:
        assert baseline_violations(renders[value_set].get("StatefulSet", "slurmd")), "slurmd should be privileged here"


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_every_container_has_resources_and_probes(renders, value_set):
    missing = []
    for doc in workloads(renders[value_set]):
        for c in pod_template(doc)["spec"]["containers"]:
            where = "%s/%s" % (doc["metadata"]["name"], c["name"])
            resources = c.get("resources") or {}
            for section in ("requests", "limits"):
                for resource in ("cpu", "memory"):
                    if resource not in (resources.get(section) or {}):
                        missing.append("%s: %s.%s" % (where, section, resource))
            for probe in ("readinessProbe", "livenessProbe"):
                if probe not in c:
                    missing.append("%s: %s" % (where, probe))
    assert not missing, missing


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_disruption_budgets_protect_the_single_instance_services(renders, value_set):
    run = renders[value_set]
    expected = {"slurmctld", "slurmdbd", "login"} | ({"mariadb"} if run.get("StatefulSet", "mariadb") else set())
    restd = run.get("Deployment", "slurmrestd")
    portal = run.get("Deployment", "portal")
    budgets = {doc["metadata"]["name"]: doc for doc in run.by_kind("PodDisruptionBudget")}
    assert set(budgets) == expected | ({"slurmrestd"} if restd else set()) | ({"portal"} if portal else set())
    for name, budget in budgets.items():
        workload = run.get("StatefulSet", name) or run.get("Deployment", name)
        labels = pod_template(workload)["metadata"]["labels"]
        if name == "slurmrestd":
            # stateless: a drain may move a lone pod; with two or more, one keeps serving
            assert budget["spec"] == dict(budget["spec"], **({"minAvailable": 1} if restd["spec"]["replicas"] > 1
                                                             else {"maxUnavailable": 1}))
        elif name == "portal":
            # one hub on its database: a drain may move it; the notebooks are Slurm jobs and run on meanwhile
            assert budget["spec"] == dict(budget["spec"], maxUnavailable=1) and "minAvailable" not in budget["spec"]
        else:
            assert budget["spec"]["minAvailable"] == 1
        assert all(labels.get(k) == v for k, v in budget["spec"]["selector"]["matchLabels"].items()), name


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_rbac_is_least_privilege(renders, value_set):
    run = renders[value_set]
    assert not run.by_kind("ClusterRole", "ClusterRoleBinding"), "no cluster-wide RBAC"
    accounts = {doc["metadata"]["name"]: doc for doc in run.by_kind("ServiceAccount")}
    groups = power_groups(value_set)
    namespace = run.get("StatefulSet", "slurmctld")["metadata"]["namespace"]
    if not groups:
        # without power saving slurmctld needs no API access: no Role, no RoleBinding at all
        assert not run.by_kind("Role", "RoleBinding")
        assert set(accounts) == {"slurmctld"}
    else:
        # exactly what slurm-k8s-power needs: create pods (Kubernetes cannot restrict create by
        # name), get/delete only the burst nodes' pods, get the StatefulSet that owns them
        nodes = ["slurmd-%s-%d" % (name, i) for name, count in groups for i in range(count)]
        assert [doc["metadata"]["name"] for doc in run.by_kind("Role")] == ["slurm-power"]
        assert run.get("Role", "slurm-power")["rules"] == [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]},
            {"apiGroups": [""], "resources": ["pods"], "resourceNames": nodes, "verbs": ["get", "delete"]},
            {"apiGroups": ["apps"], "resources": ["statefulsets"], "resourceNames": ["slurmctld"], "verbs": ["get"]},
        ]
        assert [doc["metadata"]["name"] for doc in run.by_kind("RoleBinding")] == ["slurm-power"]
        binding = run.get("RoleBinding", "slurm-power")
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "slurm-power"}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "slurmctld", "namespace": namespace}]
        assert set(accounts) == {"slurmctld", "slurmd-burst"}
    assert all(doc["automountServiceAccountToken"] is False for doc in accounts.values())
    tokens = {}
    for doc in workloads(run):
        name, spec = doc["metadata"]["name"], pod_template(doc)["spec"]
        assert spec.get("automountServiceAccountToken") is False, name
        expected = "slurmctld" if name == "slurmctld" else "slurmd-burst" if doc in run.burst_pods() else "default"
        assert spec.get("serviceAccountName", "default") == expected, name
        for volume in spec.get("volumes", []):
            for source in (volume.get("projected") or {}).get("sources", []):
                if "serviceAccountToken" in source:
                    tokens[name] = source["serviceAccountToken"]
    # the only API token is the slurmctld pod's, projected (expiring, renewed by kubelet), for power saving
    assert tokens == ({"slurmctld": {"path": "token", "expirationSeconds": 3600}} if groups else {})


# --- NetworkPolicies: a small evaluator over the rendered policies -------------------------------

def _selects(selector, labels):
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        value, op = labels.get(expr["key"]), expr["operator"]
        if (op == "In" and value not in expr["values"]) or (op == "NotIn" and value in expr["values"]) \
                or (op == "Exists" and value is None) or (op == "DoesNotExist" and value is not None):
            return False
    return True


# a peer's labels under this key: the labels of its namespace, when it is a pod of another namespace
NAMESPACE = "<namespace>"


def in_namespace(labels, namespace):
    """The labels of a pod of another namespace (named `namespace`, as the API server labels it)."""
    return dict(labels, **{NAMESPACE: {"kubernetes.io/metadata.name": namespace}})


def _peer_matches(peer, labels):
    """labels None = an address outside the cluster's pods; a pod of another namespace has its namespace's
    labels under NAMESPACE (in_namespace)."""
    if "ipBlock" in peer:
        return True  # only 0.0.0.0/0 and ::/0 are rendered: they match pod addresses too
    if labels is None:
        return False
    pod = {key: value for key, value in labels.items() if key != NAMESPACE}
    if "namespaceSelector" in peer:
        namespace = labels.get(NAMESPACE, {"kubernetes.io/metadata.name": "the-instance-namespace"})
        return _selects(peer["namespaceSelector"], namespace) and _selects(peer.get("podSelector") or {}, pod)
    return NAMESPACE not in labels and _selects(peer.get("podSelector") or {}, pod)


def _port_matches(rule, port, protocol):
    ports = rule.get("ports")
    return not ports or any(p.get("protocol", "TCP") == protocol and p.get("port") in (None, port) for p in ports)


def allowed(policies, direction, pod, peer, port, protocol="TCP"):
    """Whether traffic of `pod` (labels) with `peer` (labels or None) on port is allowed."""
    kind, field, peers = ("Ingress", "ingress", "from") if direction == "in" else ("Egress", "egress", "to")
    applying = [p for p in policies if _selects(p["spec"]["podSelector"], pod) and kind in p["spec"]["policyTypes"]]
    if not applying:
        return True
    for policy in applying:
        for rule in policy["spec"].get(field) or []:
            if _port_matches(rule, port, protocol) and (peers not in rule or any(_peer_matches(x, peer) for x in rule[peers])):
                return True
    return False


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_network_policies(renders, value_set):
    run = renders[value_set]
    values = load_values(value_set)
    policies = run.by_kind("NetworkPolicy")
    pods = {doc["metadata"]["name"]: pod_template(doc)["metadata"]["labels"] for doc in workloads(run)}
    for name, labels in pods.items():
        assert any(_selects(p["spec"]["podSelector"], labels) for p in policies), "%s has no NetworkPolicy" % name
    instance = pods["slurmctld"]["app.kubernetes.io/instance"]
    other = {"app.kubernetes.io/instance": instance, "app": "something-else"}
    backup = {"app.kubernetes.io/instance": instance, "app.kubernetes.io/part-of": "slurm",
              "hpc.slurm-k8s/database-client": "true"}
    ctld, dbd, slurmd, login = pods["slurmctld"], pods["slurmdbd"], pods["slurmd"], pods["login"]
    hostnet = bool(values.get("slurmd_host_network"))
    power = bool(power_groups(value_set))
    cases = [
        # (direction, pod, peer, port, expected)
        ("in", ctld, slurmd, 6817, True), ("in", ctld, login, 6817, True), ("in", ctld, dbd, 6817, True),
        ("in", ctld, other, 6817, hostnet), ("in", ctld, None, 6817, hostnet), ("in", ctld, slurmd, 22, False),
        ("in", dbd, ctld, 6819, True), ("in", dbd, login, 6819, True), ("in", dbd, other, 6819, hostnet),
        ("in", login, None, 22, True), ("in", login, slurmd, 41000, True), ("in", login, ctld, 41000, True),
        ("in", login, other, 41000, hostnet),
        ("in", slurmd, ctld, 6818, True), ("in", slurmd, login, 6818, True), ("in", slurmd, slurmd, 45000, True),
        ("in", slurmd, login, 45000, True), ("in", slurmd, other, 6818, False), ("in", slurmd, None, 6818, False),
        ("out", ctld, None, 53, True), ("out", ctld, dbd, 6819, True), ("out", ctld, slurmd, 6818, True),
        ("out", ctld, login, 41000, True), ("out", ctld, None, 80, hostnet),
        # the Kubernetes API (Service port, API server port) only for the power-save program
        ("out", ctld, None, 443, hostnet or power), ("out", ctld, None, 6443, hostnet or power),
        ("out", dbd, ctld, 6817, True), ("out", dbd, None, 53, True), ("out", dbd, slurmd, 6818, False),
    ]
    if "mariadb" in pods:
        db = pods["mariadb"]
        cases += [("in", db, dbd, 3306, True), ("in", db, backup, 3306, True), ("in", db, ctld, 3306, False),
                  ("in", db, login, 3306, False), ("in", db, slurmd, 3306, False), ("in", db, other, 3306, False),
                  ("out", db, None, 53, True), ("out", db, None, 443, False), ("out", dbd, db, 3306, True)]
    else:
        port = int(values["database_external_port"])
        cases += [("out", dbd, None, port, True), ("out", dbd, None, 443, False)]
    if "slurmrestd" in pods:
        # the API from anywhere; slurmrestd itself reaches slurmctld and slurmdbd, and nothing else of Slurm
        restd = pods["slurmrestd"]
        cases += [("in", restd, None, 6820, True), ("in", restd, other, 6820, True), ("in", restd, None, 22, False),
                  ("in", ctld, restd, 6817, True), ("in", dbd, restd, 6819, True), ("in", slurmd, restd, 6818, False),
                  ("in", db if "mariadb" in pods else restd, restd, 3306, False),
                  ("out", restd, ctld, 6817, True), ("out", restd, dbd, 6819, True), ("out", restd, None, 53, True),
                  ("out", restd, slurmd, 6818, False), ("out", restd, None, 443, False), ("out", restd, None, 3306, False)]
    # the scrapers of Slurm's metrics reach slurmctld's port, from the namespaces allowed, and nothing else
    scraper_labels = values.get("slurmctld_metrics_scraper_pod_labels", {"app.kubernetes.io/name": "prometheus"})
    allowed_namespace = values.get("slurmctld_metrics_scraper_namespace_labels", {}).get(
        "kubernetes.io/metadata.name", "monitoring")
    metrics = bool(values.get("cluster_metrics_enabled"))
    scraper = in_namespace(scraper_labels, allowed_namespace)
    cases += [("in", ctld, scraper, 6817, metrics or hostnet), ("in", ctld, scraper, 22, False),
              ("in", slurmd, scraper, 6818, False), ("in", dbd, scraper, 6819, hostnet),
              ("in", ctld, in_namespace({"app": "other"}, allowed_namespace), 6817, hostnet),
              # a pod of the instance's namespace with the scrapers' labels: admitted when every namespace is
              ("in", ctld, dict(scraper_labels), 6817,
               (metrics and not values.get("slurmctld_metrics_scraper_namespace_labels")) or hostnet)]
    if values.get("slurmctld_metrics_scraper_namespace_labels"):
        cases += [("in", ctld, in_namespace(scraper_labels, "elsewhere"), 6817, hostnet)]
    for pod in run.burst_pods():
        # burst pods take Slurm traffic as the always-on workers do, from them and to them
        burst = pod["metadata"]["labels"]
        cases += [("in", burst, ctld, 6818, True), ("in", burst, login, 6818, True), ("in", burst, login, 45000, True),
                  ("in", burst, slurmd, 45000, True), ("in", burst, burst, 45000, True),
                  ("in", slurmd, burst, 45000, True), ("in", ctld, burst, 6817, True), ("in", login, burst, 41000, True),
                  ("in", dbd, burst, 6819, True),
                  ("in", burst, dbd, 6818, False), ("in", burst, other, 6818, False), ("in", burst, None, 6818, False),
                  ("out", ctld, burst, 6818, True), ("out", ctld, burst, 45000, True)]
    wrong = [case for case in cases if allowed(policies, *case[:4]) != case[4]]
    assert not wrong, "\n".join("%s %s peer=%s port=%s: expected %s" % (d, p.get("app.kubernetes.io/name"),
                                (q or {}).get("app.kubernetes.io/name", q), port, e) for d, p, q, port, e in wrong)


# --- secrets ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_no_secret_outside_secrets(renders, value_set):
    run = renders[value_set]
    needles = secret_values(run)
    extra = load_values(value_set).get("database_external_password")
    if extra:
        needles.add(extra)
    assert len(needles) >= 4, "could not read the secret values back"
    # nothing secret in the ansible-playbook output (-vvv for VERBOSE_SETS)
    assert value_set not in VERBOSE_SETS or "ESTABLISH LOCAL CONNECTION" in run.output, "not a -vvv run"
    leaked = sorted(n[:6] + "..." for n in needles if n in run.output)
    assert not leaked, "secret values in the ansible-playbook output: %s" % leaked
    for path, doc in run.docs().items():
        if doc["kind"] == "Secret":
            continue
        text = yaml.safe_dump(doc)
        leaked = sorted(n[:6] + "..." for n in needles if n in text)
        assert not leaked, "secret values in %s: %s" % (path, leaked)
    for doc in workloads(run):
        for c in containers(doc):
            for env in c.get("env", []):
                assert "value" in env or "secretKeyRef" not in env.get("valueFrom", {}), \
                    "%s: secret in env %s (mount it as a file)" % (doc["metadata"]["name"], env["name"])


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_slurmdbd_reads_the_database_password_from_its_secret(renders, value_set):
    """slurmdbd.conf holds no password: the pod mounts one key of the password's Secret (the internal
    database's, or the collection's Secret of database_external_password), and the entrypoint adds it."""
    run = renders[value_set]
    conf = base64.b64decode(run.get("Secret", "slurmdbd-config")["data"]["slurmdbd.conf"]).decode()
    assert not re.search(r"^StoragePass", conf, re.M) and "StorageUser=" in conf
    statefulset = run.get("StatefulSet", "slurmdbd")
    volume = next(v for v in pod_template(statefulset)["spec"]["volumes"] if v["name"] == "storage-password")
    external = load_values(value_set).get("database_mode") == "external"
    expected = "slurm-database-external" if external else "slurm-database"
    assert volume["secret"] == {"secretName": expected, "items": [{"key": "password", "path": "password"}], "defaultMode": 256}
    mounts = {m["name"]: m for m in containers(statefulset)[0]["volumeMounts"]}
    assert mounts["storage-password"] == {"name": "storage-password", "mountPath": "/etc/slurm-k8s/storage", "readOnly": True}
    assert (run.get("Secret", "slurm-database-external") is not None) == external
    if external:
        password = base64.b64decode(run.get("Secret", "slurm-database-external")["data"]["password"]).decode()
        assert password == load_values(value_set)["database_external_password"]


# --- restart semantics -----------------------------------------------------------------------------

def consumed_objects(doc):
    """(kind, name) of every ConfigMap/Secret a pod mounts or reads into its environment."""
    spec = pod_template(doc)["spec"]
    used = set()
    for volume in spec.get("volumes", []):
        if "configMap" in volume:
            used.add(("ConfigMap", volume["configMap"]["name"]))
        if "secret" in volume:
            used.add(("Secret", volume["secret"]["secretName"]))
        for source in (volume.get("projected") or {}).get("sources", []):
            if "configMap" in source:
                used.add(("ConfigMap", source["configMap"]["name"]))
            if "secret" in source:
                used.add(("Secret", source["secret"]["name"]))
    for c in containers(doc):
        for env in c.get("env", []):
            ref = env.get("valueFrom") or {}
            if "secretKeyRef" in ref:
                used.add(("Secret", ref["secretKeyRef"]["name"]))
            if "configMapKeyRef" in ref:
                used.add(("ConfigMap", ref["configMapKeyRef"]["name"]))
        for env_from in c.get("envFrom", []):
            if "secretRef" in env_from:
                used.add(("Secret", env_from["secretRef"]["name"]))
            if "configMapRef" in env_from:
                used.add(("ConfigMap", env_from["configMapRef"]["name"]))
    return used


def tracked_object(doc, key):
    """(kind, name) that a checksum annotation tracks: storage-password, the Secret slurmdbd mounts as its
    database password (slurm-database, slurm-database-external or the site's); portal-tls and portal-oidc, the
    site's Secrets the hub mounts; the others by CHECKSUM_OF."""
    if key == "storage-password":
        volume = next(v for v in pod_template(doc)["spec"]["volumes"] if v["name"] == "storage-password")
        return ("Secret", volume["secret"]["secretName"])
    if key == "portal-tls":
        volume = next(v for v in pod_template(doc)["spec"]["volumes"] if v["name"] == "tls")
        return ("Secret", volume["secret"]["secretName"])
    if key == "portal-oidc":
        volume = next(v for v in pod_template(doc)["spec"]["volumes"] if v["name"] == "portal-secrets")
        (site,) = [s["secret"]["name"] for s in volume["projected"]["sources"] if s["secret"]["name"] != "portal"]
        return ("Secret", site)
    return CHECKSUM_OF[key]


def expected_checksum(run, kind, name):
    """The checksum the roles put in pod templates for this object, recomputed from its manifest."""
    doc = run.get(kind, name)
    data = doc.get("data") or {}
    if (kind, name) == ("Secret", "slurmdbd-config"):
        return hashlib.sha256(base64.b64decode(data["slurmdbd.conf"])).hexdigest()
    if (kind, name) == ("ConfigMap", "slurm-config"):
        return hashlib.sha256(data["slurm.conf"].encode()).hexdigest()
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_pods_carry_checksums_of_exactly_what_they_consume_at_start(renders, value_set):
    run = renders[value_set]
    # not the burst pods: each is made from the objects as they are when Slurm powers its node up, and
    # goes when the node is idle; there is no template for a checksum to roll
    for doc in run.by_kind(*WORKLOAD_KINDS):
        name = doc["metadata"]["name"]
        annotations = pod_template(doc)["metadata"].get("annotations") or {}
        checksums = {key.split("/checksum-", 1)[1]: value for key, value in annotations.items()
                     if key.startswith("hpc.slurm-k8s/checksum-")}
        tracked = {tracked_object(doc, key) for key in checksums}
        hot = HOT_RELOADED - ({("ConfigMap", "slurm-config")} if (doc["kind"], name) in RESTARTED_BY_SLURM_CONF else set())
        assert tracked == consumed_objects(doc) - hot - READ_AT_INITIALISATION.get(name, set()), name
        for key, value in checksums.items():
            assert value == expected_checksum(run, *tracked_object(doc, key)), "%s: %s is stale" % (name, key)


def _mounts_slurm_config(doc):
    return '"slurm-config"' in json.dumps(pod_template(doc)["spec"].get("volumes", []))


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_configless_nodes_mount_no_slurm_conf_and_fetch_it_from_slurmctld(renders, value_set):
    """cluster_configless (default true): slurm.conf enables configless, keeping the SlurmctldParameters the value
    set gives; the workers, the burst pods and login mount no slurm-config and get --conf-server through
    SLURM_CONF_SERVER, while slurmctld, slurmdbd and slurmrestd mount it. false: every Slurm pod mounts it."""
    run, values = renders[value_set], load_values(value_set)
    configless = values.get("cluster_configless", True)
    conf = run.get("ConfigMap", "slurm-config")["data"]["slurm.conf"]
    parameters = [line.split("=", 1)[1].split(",") for line in conf.splitlines() if line.startswith("SlurmctldParameters=")]
    given = values.get("config_slurm_conf", {}).get("SlurmctldParameters", [])
    given = given.split(",") if isinstance(given, str) else given
    assert parameters == ([given + ["enable_configless"]] if configless else [given] if given else []), parameters
    nodes = [doc for doc in workloads(run) if doc["metadata"]["name"] in ("slurmd", "login")
             or pod_template(doc)["metadata"]["labels"].get("app.kubernetes.io/component") == "burst-worker"]
    assert len(nodes) == 2 + len(power_groups(value_set))   # a burst pod of each group
    for doc in nodes:
        env = {e["name"]: e.get("value") for e in containers(doc)[0].get("env", [])}
        name = doc["metadata"]["name"]
        assert env.get("SLURM_CONF_SERVER") == ("slurmctld:6817" if configless else None), name
        assert _mounts_slurm_config(doc) is not configless, name
    for name in ("slurmctld", "slurmdbd") + (("slurmrestd",) if values.get("cluster_slurmrestd_enabled") else ()):
        doc = run.get("StatefulSet", name) or run.get("Deployment", name)
        assert _mounts_slurm_config(doc), name


def _templates(run):
    return {(doc["kind"], doc["metadata"]["name"]): doc for doc in workloads(run)}


def test_slurm_conf_and_users_changes_restart_no_pod(runs, renders):
    """The variant changes slurm.conf and adds two users in one group, one with a key."""
    before, after = renders["defaults"], runs.result("restart/slurm-conf").check()
    assert "12345" in after.get("ConfigMap", "slurm-config")["data"]["slurm.conf"]
    assert before.get("ConfigMap", "slurm-config") != after.get("ConfigMap", "slurm-config")
    users = after.get("ConfigMap", "slurm-users")["data"]
    assert users == {"passwd": "bob:*:3001:3000::/home/bob:/bin/zsh\ncarol:*:3002:3000::/home/carol:/bin/bash\n",
                     "group": "bob:x:3000:\n", "bob.authorized_keys": VARIANT_USERS[0]["authorized_keys"][0] + "\n"}
    assert users != before.get("ConfigMap", "slurm-users")["data"]
    changed = sorted(key for key, doc in _templates(after).items() if _templates(before).get(key) != doc)
    assert changed == [], "a slurm.conf or users change altered the pod templates of %s" % changed
    # the config role read the deployed slurm.conf and users (here from the directory) and saw the changes:
    # the reconfigure and the users' propagation are notified (tests/k8s shows them reaching the pods)
    assert "slurm.conf changed (%s): Slurm will be reconfigured" % hashlib.sha256(
        after.get("ConfigMap", "slurm-config")["data"]["slurm.conf"].encode()).hexdigest() in after.output, \
        after.output[-3000:]
    assert "the users changed (%s): every pod reads them" % hashlib.sha256(
        json.dumps(users, sort_keys=True).encode()).hexdigest() in after.output, after.output[-3000:]


def test_new_munge_key_restarts_exactly_the_pods_that_mount_it(runs, renders):
    before, after = renders["defaults"], runs.result("restart/munge-key").check()
    assert before.get("Secret", "munge-key")["data"] != after.get("Secret", "munge-key")["data"]
    old, new = _templates(before), _templates(after)
    changed = {key for key in new if old.get(key) != new[key]}
    mounting = {key for key, doc in new.items() if ("Secret", "munge-key") in consumed_objects(doc)}
    assert changed == mounting and mounting >= {("StatefulSet", "slurmctld"), ("StatefulSet", "slurmd"),
                                                ("StatefulSet", "slurmdbd"), ("Deployment", "login")}
    for key in changed:  # and only through the checksum annotation
        a, b = copy.deepcopy(old[key]), copy.deepcopy(new[key])
        for doc in (a, b):
            pod_template(doc)["metadata"]["annotations"].pop("hpc.slurm-k8s/checksum-munge-key")
        assert a == b, key
