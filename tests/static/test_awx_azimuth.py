"""Static tier: the AWX and Azimuth entry points at the repository root (issue 6).

Data against the roles: every Azimuth ui-meta parameter, every AWX survey, extra or inventory variable,
and every role variable the Azimuth entry point derives (entrypoints/azimuth-variables.yml) is accepted
by a role's meta/argument_specs.yml, with a compatible type. Schemas: the ui-meta document against a
JSON schema written from Azimuth's code (parameters, kinds, services), the execution environment
definition through ansible-builder's own loader. Behaviour, with ansible-playbook: no credentials fail
the preflight before anything changes; the kubectl connection works with the variables of AWX's bearer
token credential; the Azimuth entry point, run in render mode, ends with an `outputs` debug that holds
the login address and none of the rendered Secrets, and its delete runs remove everything, then nothing.
"""

from __future__ import annotations

import base64
import fnmatch
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
AZIMUTH = ROOT / "azimuth-slurm.yml"
MAPPING = ROOT / "entrypoints" / "azimuth-variables.yml"
UI_META = sorted((ROOT / "ui-meta").glob("*.yml"))
EE_DIR = ROOT / "execution-environment"
AWX_DIR = ROOT / "awx"
RECAP = re.compile(r"localhost\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)")
# What the outputs of the Azimuth entry point may hold: names and addresses, never a secret.
OUTPUT_KEYS = {"cluster_name", "namespace", "workers", "login_user", "login_port", "login_host", "ssh_command",
               "portal_url", "ood_url"}
# the bcrypt hash of a password thrown away (a portal user's, from the site's extraVars)
PORTAL_HASH = "$2b$12$0r8yFfqkCg1Ux3S0PvVwXO0lZr8Tn3M7kqY1v2yQdQy8m3e8zqC9a"
# a real public key (the private half was thrown away): the collection checks the key data
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHfhvvwmdzMN099xqGQx61HMK9sICrHAiCDVzK+eXmi6 owner@azimuth"


class Loader(yaml.SafeLoader):  # pylint: disable=too-many-ancestors
    """YAML as Ansible reads it: `!unsafe` marks a string that is never templated (AWX injector templates)."""


Loader.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))


def load(path):
    return yaml.load(Path(path).read_text(), Loader=Loader)  # a SafeLoader with one more tag


def galaxy():
    return load(ROOT / "galaxy.yml")


def role_variables():
    """{variable: (role, option spec)} over every entry point of every role's argument specs."""
    found = {}
    for path in sorted(ROOT.glob("roles/*/meta/argument_specs.yml")):
        for entry in load(path)["argument_specs"].values():
            for name, spec in (entry.get("options") or {}).items():
                found.setdefault(name, (path.parts[-3], spec))
    return found


ROLE_VARIABLES = role_variables()


def require(module):
    """Import a test tool; a missing one fails in CI (CI=true) instead of skipping."""
    try:
        return __import__(module, fromlist=["_"])
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("%s is missing (tests/ci/requirements.txt)" % module)
        pytest.skip("%s is not installed (make deps)" % module)
    return None


def ansible_env(home, **extra):
    """A clean environment: no KUBECONFIG or K8S_AUTH_* of the caller, an empty HOME."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8",
           "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_COLLECTIONS_PATH": os.environ.get("ANSIBLE_COLLECTIONS_PATH", str(ROOT / ".cache" / "collections")),
           "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false"}
    env.update(extra)
    return env


def ansible_playbook(playbook, variables, env, *extra, cwd=ROOT, timeout=900):
    proc = subprocess.run(["ansible-playbook", str(playbook), "-e", json.dumps(variables), *extra], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)
    recap = RECAP.search(proc.stdout)
    assert recap, "no PLAY RECAP (rc=%s)\n%s\n%s" % (proc.returncode, proc.stdout[-4000:], proc.stderr[-3000:])
    return proc, {"ok": int(recap.group(1)), "changed": int(recap.group(2)), "failed": int(recap.group(4))}


def printed_outputs(stdout):
    """The dict the last task ('Outputs') printed."""
    match = re.search(r"TASK \[Outputs\][^\n]*\nok: \[localhost\] => (\{\n.*?\n\})\n", stdout, re.S)
    assert match, stdout[-3000:]
    return json.loads(match.group(1))["outputs"]


# --- type compatibility between the tools' parameter kinds and the argument specs ----------------------------

def compatible(spec, kind, choices=None):
    """True when a value of the tool's kind (and choices) is accepted by an argument spec option."""
    wanted = spec.get("type", "str")
    if kind == "bool":
        return wanted == "bool"
    if kind == "choice":
        return wanted == "str" and (not spec.get("choices") or set(choices) <= set(spec["choices"]))
    return wanted == kind


UI_KINDS = {"integer": "int", "number": "float", "boolean": "bool", "string": "str", "list": "list", "choice": "choice"}


def survey_kind(question):
    if question["type"] == "multiplechoice" and sorted(question["choices"]) == ["false", "true"]:
        return "bool"
    return {"integer": "int", "float": "float", "text": "str", "textarea": "str", "password": "str",
            "multiplechoice": "choice", "multiselect": "list"}[question["type"]]


# --- Azimuth ui-meta -------------------------------------------------------------------------------------------

# Written from Azimuth's cluster engine (azimuth: cluster_engine/dto.py ClusterType.from_dict, validation.py
# kind constraints) and the CaaS operator (models/v1alpha1/cluster_type.py, operator.py _fetch_ui_meta_from_url).
UI_META_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "label", "parameters"],
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
        "label": {"type": "string", "minLength": 1},
        "description": {"type": "string"},
        "logo": {"type": "string", "pattern": "^(https?://|data:)"},
        "requires_ssh_key": {"type": "boolean"},
        "usage_template": {"type": "string"},
        "parameters": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name", "label", "kind"],
                "properties": {
                    "name": {"type": "string", "pattern": "^[a-z_][a-z0-9_]*$"},
                    "label": {"type": "string", "minLength": 1},
                    "description": {"type": "string"},
                    "kind": {"enum": ["string", "integer", "number", "boolean", "choice", "list", "cloud.size",
                                      "cloud.machine", "cloud.ip", "cloud.volume", "cloud.cluster"]},
                    "required": {"type": "boolean"},
                    "immutable": {"type": "boolean"},
                    "hidden": {"type": "boolean"},
                    "default": {},
                    "options": {"type": "object"},
                },
                "allOf": [
                    {"if": {"properties": {"kind": {"const": "choice"}}},
                     "then": {"required": ["options"], "properties": {"options": {
                         "required": ["choices"], "properties": {"choices": {"type": "array", "minItems": 1}}}}}},
                    {"if": {"properties": {"kind": {"enum": ["integer", "number"]}}},
                     "then": {"properties": {"default": {"type": "number"}, "options": {
                         "properties": {"min": {"type": "number"}, "max": {"type": "number"}}}}}},
                    {"if": {"properties": {"kind": {"const": "boolean"}}},
                     "then": {"properties": {"default": {"type": "boolean"}}}},
                    {"if": {"properties": {"kind": {"const": "string"}}},
                     "then": {"properties": {"default": {"type": "string"}, "options": {"properties": {
                         "pattern": {"type": "string"}, "min_length": {"type": "integer"},
                         "max_length": {"type": "integer"}}}}}},
                ],
            },
        },
        "services": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name", "label"],
                "properties": {"name": {"type": "string"}, "label": {"type": "string"}, "icon_url": {"type": "string"},
                               "when": {"type": "string"}},
            },
        },
    },
}


@pytest.mark.parametrize("path", UI_META, ids=lambda p: p.name)
def test_ui_meta_validates_against_the_azimuth_schema(path):
    jsonschema = require("jsonschema")
    document = load(path)
    jsonschema.validate(document, UI_META_SCHEMA)
    names = [p["name"] for p in document["parameters"]]
    assert len(names) == len(set(names)), names
    for param in document["parameters"]:
        # the CaaS operator defaults immutable to true, Azimuth's own engine to false: say it
        assert "immutable" in param and "required" in param, param["name"]
        options = param.get("options", {})
        default = param.get("default")
        if param["kind"] in ("integer", "number") and default is not None:
            assert options.get("min", default) <= default <= options.get("max", default), param["name"]
        if param["kind"] == "choice" and default is not None:
            assert default in options["choices"], param["name"]
        if param["kind"] == "string" and default is not None and "pattern" in options:
            assert re.match(options["pattern"], default), param["name"]
    assert document.get("requires_ssh_key") is True, "the login user gets the owner's SSH key"
    assert "cluster.outputs" in document.get("usage_template", "")


@pytest.mark.parametrize("path", UI_META, ids=lambda p: p.name)
def test_ui_meta_parameters_are_role_variables(path):
    for param in load(path)["parameters"]:
        assert param["name"] in ROLE_VARIABLES, "%s is no role variable" % param["name"]
        role, spec = ROLE_VARIABLES[param["name"]]
        kind = UI_KINDS[param["kind"]]
        assert compatible(spec, kind, param.get("options", {}).get("choices")), (param["name"], role, spec)


def test_usage_template_reads_only_outputs_the_entry_point_sets():
    for path in UI_META:
        used = set(re.findall(r"cluster\.outputs\.(\w+)", load(path)["usage_template"]))
        assert used <= OUTPUT_KEYS, used - OUTPUT_KEYS


# --- the mapping of the Azimuth entry point --------------------------------------------------------------------

def test_azimuth_mapping_sets_only_role_variables_from_declared_inputs():
    mapping = load(MAPPING)
    derived = mapping["_platform_derived"]
    internal = dict((k, v) for k, v in mapping.items() if k.startswith("_platform_") and k != "_platform_derived")
    for name, inputs in derived.items():
        assert name in ROLE_VARIABLES, "%s is no role variable" % name
        assert name in mapping, "%s is declared but not set" % name
        text = yaml.safe_dump(mapping[name])
        # expand the internal helpers the expression uses, once
        text += "".join(yaml.safe_dump(v) for k, v in internal.items() if k in text)
        for source in inputs:
            assert re.search(r"\b%s\b" % re.escape(source), text), "%s does not use %s" % (name, source)
    for name in mapping:
        if name.startswith("_platform_") or name.startswith("platform_"):
            continue
        assert name in derived, "%s is set but not declared in _platform_derived" % name
    # the entry point's own settings never shadow a role variable
    assert not [k for k in mapping if k.startswith("platform_") and k in ROLE_VARIABLES]
    # and the role variables the mapping sets are no ui-meta parameters (those come from Azimuth as they are)
    parameters = set(p["name"] for path in UI_META for p in load(path)["parameters"])
    assert not (set(derived) - {"teardown_delete_volumes"}) & parameters


def test_azimuth_playbook_loads_the_mapping_and_checks_the_platform_name():
    plays = load(AZIMUTH)
    first = plays[0]["tasks"]
    assert first[0]["ansible.builtin.include_vars"]["file"] == "entrypoints/azimuth-variables.yml"
    name_check = [t for t in first if t["name"].startswith("Check the platform name")]
    assert name_check and "cluster_name is match(_platform_name_pattern)" in name_check[0]["ansible.builtin.assert"]["that"]
    assert any(t.get("ansible.builtin.import_tasks") == "entrypoints/prepare.yml" for t in first)
    imported = dict((p["ansible.builtin.import_playbook"], p.get("when")) for p in plays
                    if "ansible.builtin.import_playbook" in p)
    assert imported == {"playbooks/teardown.yml": "_platform_action == 'delete'",
                        "playbooks/upgrade.yml": "_platform_action == 'upgrade'",
                        "playbooks/scale.yml": "_platform_action == 'scale'",
                        "playbooks/site.yml": "_platform_action == 'site'"}


def test_outputs_is_the_last_task_and_holds_only_names_and_addresses():
    last_play = load(AZIMUTH)[-1]
    assert "hosts" in last_play, "the outputs play comes last"
    tasks = last_play["tasks"]
    last = tasks[-1]
    action = [k for k in last if k in ("debug", "ansible.builtin.debug")]
    assert action and last[action[0]] == {"var": "outputs"}, last
    assert not last.get("no_log")
    outputs = last["vars"]["outputs"]
    assert outputs == "{{ _platform_outputs }}"
    builder = [t for t in tasks if "_platform_outputs" in t.get("ansible.builtin.set_fact", {})]
    assert len(builder) == 1
    expression = builder[0]["ansible.builtin.set_fact"]["_platform_outputs"]
    keys = set(re.findall(r"'(\w+)':", expression))
    assert keys and keys <= OUTPUT_KEYS, keys - OUTPUT_KEYS
    whole = json.dumps(builder[0])
    for secretish in ("secrets_data", "database_connection", "password", "munge", "token", "kubeconfig"):
        assert secretish not in whole, secretish


# --- AWX data ----------------------------------------------------------------------------------------------------

def awx(name):
    return load(AWX_DIR / name)


def surveys():
    for item in awx("templates.yml")["controller_templates"] + awx("workflows.yml")["controller_workflows"]:
        if item.get("survey_enabled"):
            yield item["name"], item["survey_spec"]


def test_awx_survey_variables_are_role_variables():
    seen = 0
    for name, survey in surveys():
        for question in survey["spec"]:
            variable = question["variable"]
            assert variable in ROLE_VARIABLES, "%s: %s is no role variable" % (name, variable)
            role, spec = ROLE_VARIABLES[variable]
            kind = survey_kind(question)
            assert compatible(spec, kind, question.get("choices")), (name, variable, role, spec)
            assert question["type"] in ("text", "textarea", "password", "integer", "float", "multiplechoice",
                                        "multiselect")
            if "default" in question:
                if question["type"] == "integer":
                    assert question.get("min", question["default"]) <= question["default"] <= question.get(
                        "max", question["default"]), (name, variable)
                if question["type"] == "multiplechoice":
                    assert question["default"] in question["choices"], (name, variable)
            seen += 1
    assert seen >= 10


def test_awx_extra_and_inventory_variables_are_role_variables():
    names = []
    for template in awx("templates.yml")["controller_templates"]:
        names += [(template["name"], k) for k in template.get("extra_vars", {})]
    for inventory in awx("inventories.yml")["controller_inventories"]:
        names += [(inventory["name"], k) for k in inventory.get("variables", {})]
    for owner, name in names:
        assert name in ROLE_VARIABLES, "%s: %s is no role variable" % (owner, name)


def test_awx_objects_refer_to_each_other_and_to_the_playbooks():
    templates = dict((t["name"], t) for t in awx("templates.yml")["controller_templates"])
    project = awx("projects.yml")["controller_projects"][0]["name"]
    inventory = awx("inventories.yml")["controller_inventories"][0]["name"]
    environment = awx("execution_environments.yml")["controller_execution_environments"][0]["name"]
    group = awx("instance_groups.yml")["controller_instance_groups"][0]
    credential = awx("credentials.yml")["controller_credentials"][0]
    credential_types = dict((t["name"], t) for t in awx("credential_types.yml")["controller_credential_types"])
    assert credential["credential_type"] in credential_types
    injectors = credential_types[credential["credential_type"]]["injectors"]
    assert "K8S_AUTH_KUBECONFIG" in injectors["env"]
    pod = yaml.safe_load(group["pod_spec_override"])
    assert pod["spec"]["automountServiceAccountToken"] is False
    mount = pod["spec"]["containers"][0]["volumeMounts"][0]["mountPath"]
    backup_dir = awx("inventories.yml")["controller_inventories"][0]["variables"]["upgrade_backup_dir"]
    assert backup_dir.startswith(mount + "/"), "the upgrade state must outlive the job pods"
    for name, template in templates.items():
        playbook = ROOT / template["playbook"]
        assert playbook.is_file() and template["playbook"].startswith("awx-"), name
        assert (template["project"], template["inventory"], template["execution_environment"]) == (
            project, inventory, environment), name
        assert template["credentials"] == [credential["name"]] and template["instance_groups"] == [group["name"]]
    phases = dict((t["extra_vars"]["upgrade_phase"], n) for n, t in templates.items()
                  if t["playbook"] == "awx-upgrade.yml")
    assert set(phases) == {"all", "pre", "apply", "post"}
    # the workflow: pre -> approval -> apply -> approval -> post; denying the first approval resumes the nodes
    workflow = awx("workflows.yml")["controller_workflows"][0]
    nodes = dict((n["identifier"], n) for n in workflow["simplified_workflow_nodes"])
    for node in nodes.values():
        assert ("approval_node" in node) != ("unified_job_template" in node)
        assert node.get("unified_job_template", phases["pre"]) in templates
        for target in node.get("success_nodes", []) + node.get("failure_nodes", []):
            assert target in nodes
    pre = next(i for i, n in nodes.items() if n.get("unified_job_template") == phases["pre"])
    chain, current = [], pre
    while current:
        node = nodes[current]
        chain.append(node.get("unified_job_template") or "approval")
        current = (node.get("success_nodes") or [None])[0]
    assert chain == [phases["pre"], "approval", phases["apply"], "approval", phases["post"]]
    first_approval = nodes[nodes[pre]["success_nodes"][0]]
    assert [nodes[t]["unified_job_template"] for t in first_approval["failure_nodes"]] == [phases["post"]]


@pytest.mark.parametrize("playbook", sorted(ROOT.glob("awx-*.yml")), ids=lambda p: p.name)
def test_awx_playbooks_check_first_then_import_the_collection_playbook(playbook):
    plays = load(playbook)
    assert len(plays) == 2
    assert plays[0]["tasks"][0]["ansible.builtin.import_tasks"] == "entrypoints/prepare.yml"
    assert plays[0]["tasks"][0]["tags"] == ["always"]
    target = plays[1]["ansible.builtin.import_playbook"]
    assert target == "playbooks/%s.yml" % playbook.stem.split("-", 1)[1]
    assert (ROOT / target).is_file()


# --- requirements, execution environment, collection build -----------------------------------------------------

def test_requirements_pin_kubernetes_core_like_galaxy_yml():
    wanted = galaxy()["dependencies"]["kubernetes.core"]
    for path in (ROOT / "requirements.yml", EE_DIR / "requirements.yml"):
        collections = dict((c["name"], c) for c in load(path)["collections"])
        assert collections["kubernetes.core"]["version"] == wanted, path
    this = [c for c in load(ROOT / "requirements.yml")["collections"] if c.get("type") == "git"]
    assert len(this) == 1 and this[0]["name"].endswith(".git"), "this collection, from its git repository"


def test_execution_environment_definition_loads_with_ansible_builder(tmp_path):
    user_definition = require("ansible_builder.user_definition")
    definition = user_definition.UserDefinition(str(EE_DIR / "execution-environment.yml"))
    definition.validate()
    assert definition.version == 3
    raw = definition.raw
    tarball = "collection/hpc-slurm_k8s-%s.tar.gz" % galaxy()["version"]
    assert [f["src"] for f in raw["additional_build_files"] if fnmatch.fnmatch(tarball, f["src"])]
    final = " ".join(raw["additional_build_steps"]["append_final"])
    assert "dl.k8s.io" in final and "sha256sum --check" in final and "/usr/local/bin/kubectl" in final
    # ansible-builder writes the build context (Containerfile and _build/) without building anything
    proc = subprocess.run([sys.executable, "-m", "ansible_builder", "create", "-f",
                           str(EE_DIR / "execution-environment.yml"), "-c", str(tmp_path / "context"),
                           "--output-filename", "Containerfile"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    containerfile = (tmp_path / "context" / "Containerfile").read_text()
    assert "ansible-galaxy collection install --no-deps" in containerfile
    assert "kubectl version --client" in containerfile
    assert "openshift-clients" in (tmp_path / "context" / "_build" / "exclude-bindep.txt").read_text()


def test_collection_declares_its_ee_dependencies_and_ships_them():
    introspect = require("ansible_builder._target_scripts.introspect")
    python, system = introspect.process_collection(str(ROOT))
    assert any(line.startswith("kubernetes>=") for line in python) and "jsonpatch" in python
    assert any(line.startswith("openssh-clients") for line in system)
    meta = load(ROOT / "meta" / "execution-environment.yml")["dependencies"]
    for relative in meta.values():
        assert not ignored_by_build(relative), "%s is named by meta/execution-environment.yml" % relative


def ignored_by_build(relative):
    """ansible-galaxy collection build's rule: a path is left out when it, or a parent, matches a pattern."""
    parts = Path(relative).parts
    return any(fnmatch.fnmatch("/".join(parts[:i]), pattern)
               for i in range(1, len(parts) + 1) for pattern in galaxy()["build_ignore"])


@pytest.mark.parametrize("relative", ["ansible.cfg", "requirements.yml", "azimuth-slurm.yml", "awx-site.yml",
                                      "awx-upgrade.yml", "entrypoints/prepare.yml", "ui-meta/slurm-k8s.yml",
                                      "awx/templates.yml", "execution-environment/execution-environment.yml"])
def test_entry_points_stay_out_of_the_collection_build(relative):
    assert (ROOT / relative).exists()
    assert ignored_by_build(relative)


# --- behaviour --------------------------------------------------------------------------------------------------

AZIMUTH_VARS = {"cluster_name": "azt", "cluster_id": "azt-static-0001", "cluster_type": "slurm-k8s",
                "cluster_user_ssh_public_key": SSH_KEY, "storage_class": "rwx"}


@pytest.mark.parametrize("playbook", ["azimuth-slurm.yml", "awx-site.yml"])
def test_missing_credentials_fail_the_preflight_and_change_nothing(playbook, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    proc, recap = ansible_playbook(ROOT / playbook, AZIMUTH_VARS, ansible_env(home))
    assert proc.returncode != 0
    assert recap["changed"] == 0 and recap["failed"] == 1, recap
    assert "TASK [hpc.slurm_k8s.cluster : Check that the target cluster is named explicitly]" in proc.stdout
    message = re.sub(r"\s+", " ", proc.stdout)
    assert "No credentials for the target Kubernetes cluster" in message
    assert "K8S_AUTH_KUBECONFIG" in message and "K8S_AUTH_HOST and K8S_AUTH_API_KEY" in message
    assert "Nothing was changed." in message
    assert sorted(p.name for p in home.iterdir()) in ([], [".ansible"])


@pytest.mark.parametrize("state", ["present", "absent"])
def test_unusable_platform_name_refuses_create_and_lets_delete_succeed(state, tmp_path):
    """Azimuth's cluster_name cannot be overridden: a create refuses it, the delete of that platform is a no-op."""
    proc, recap = ansible_playbook(AZIMUTH, dict(AZIMUTH_VARS, cluster_name="2nd-cluster", cluster_state=state),
                                   ansible_env(tmp_path))
    assert recap["changed"] == 0, recap
    if state == "present":
        assert proc.returncode != 0 and recap["failed"] == 1
        assert "The platform name '2nd-cluster' cannot be used" in re.sub(r"\s+", " ", proc.stdout)
    else:
        assert proc.returncode == 0 and printed_outputs(proc.stdout) == {}, proc.stdout[-3000:]


FAKE_KUBECTL = """#!%s
# kubectl stand-in: logs its arguments, answers `version`, runs `exec ... -- CMD` here (a local "pod")
import json, os, sys
with open(os.environ["FAKE_KUBECTL_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
if "version" in sys.argv[1:]:
    print("Client Version: v1.34.1")
    sys.exit(0)
command = sys.argv[sys.argv.index("--") + 1:]
os.execvp(command[0], command)
"""


@pytest.mark.parametrize("verify", ["False", "True"])
def test_kubectl_connection_works_with_the_awx_bearer_token_credential(verify, tmp_path):
    """AWX sets K8S_AUTH_HOST, K8S_AUTH_API_KEY and K8S_AUTH_VERIFY_SSL ("True"/"False", + a CA file when true)."""
    (tmp_path / "meta").mkdir()
    shutil.copy(ROOT / "meta" / "runtime.yml", tmp_path / "meta" / "runtime.yml")
    (tmp_path / "entrypoints").symlink_to(ROOT / "entrypoints")
    (tmp_path / "bin").mkdir()
    kubectl = tmp_path / "bin" / "kubectl"
    kubectl.write_text(FAKE_KUBECTL % sys.executable)
    kubectl.chmod(kubectl.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{
        "name": "prepare, then run a command in the slurmctld pod", "hosts": "localhost", "connection": "local",
        "gather_facts": False, "tasks": [
            {"ansible.builtin.import_tasks": "entrypoints/prepare.yml"},
            {"ansible.builtin.add_host": "{{ {'name': 'pod'} | combine(cluster_slurmctld_connection) }}"},
            {"ansible.builtin.command": {"argv": ["echo", "in the pod"]}, "delegate_to": "pod",
             "register": "pod_result"},
            {"ansible.builtin.assert": {"that": ["pod_result.stdout == 'in the pod'"]}}]}]))
    (tmp_path / "home").mkdir()
    log = tmp_path / "kubectl.log"
    env = ansible_env(tmp_path / "home", PATH="%s:%s" % (tmp_path / "bin", os.environ.get("PATH", "/usr/bin:/bin")),
                      FAKE_KUBECTL_LOG=str(log), K8S_AUTH_HOST="https://192.0.2.1:6443",
                      K8S_AUTH_API_KEY="awx-bearer-token-not-for-output", K8S_AUTH_VERIFY_SSL=verify)
    if verify == "True":
        (tmp_path / "ca.crt").write_text("CA\n")
        env["K8S_AUTH_SSL_CA_CERT"] = str(tmp_path / "ca.crt")
    proc, recap = ansible_playbook(tmp_path / "play.yml", {"cluster_namespace": "slurm-tls"}, env, "-vvv",
                                   cwd=tmp_path)
    assert proc.returncode == 0 and recap["failed"] == 0, proc.stdout[-5000:]
    assert "awx-bearer-token-not-for-output" not in proc.stdout + proc.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    execs = [c for c in calls if "exec" in c]
    assert execs, calls
    for argv in execs:
        options = argv[:argv.index("exec")]
        assert "True" not in options and "False" not in options, argv
        assert options[options.index("--server") + 1] == "https://192.0.2.1:6443"
        assert options[options.index("-n") + 1] == "slurm-tls"
        if verify == "True":
            assert "--certificate-authority" in options and not [o for o in options if "insecure" in o], argv
        else:
            assert "--insecure-skip-tls-verify=true" in options and "--certificate-authority" not in options, argv


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """The Azimuth entry point in render mode (no render command): create, then delete twice."""
    work = tmp_path_factory.mktemp("azimuth")
    (work / "home").mkdir()
    variables = dict(AZIMUTH_VARS, cluster_render_dir=str(work / "render"), slurmd_replicas=3,
                     login_service_type="NodePort", login_node_port=30024, platform_login_host="192.0.2.7",
                     # the ui-meta option; the site's extraVars give the portal's logins and its Service
                     cluster_portal_enabled=True, portal_service_type="NodePort", portal_node_port=30025,
                     portal_users=[{"name": "azimuth", "password_hash": PORTAL_HASH}])
    env = ansible_env(work / "home")
    runs = {"create": ansible_playbook(AZIMUTH, variables, env)}
    namespace_dir = work / "render" / "slurm-azt-static-0001"
    secrets = {}
    for path in sorted(namespace_dir.glob("secret-*.yaml")):
        doc = load(path)
        values = [base64.b64decode(v).decode() for v in (doc.get("data") or {}).values()]
        values += list((doc.get("stringData") or {}).values())
        secrets[path.name] = values
    manifests = dict((str(p.relative_to(work / "render")), load(p)) for p in sorted((work / "render").rglob("*.yaml")))
    runs["delete"] = ansible_playbook(AZIMUTH, dict(variables, cluster_state="absent"), env)
    remaining = sorted(str(p.relative_to(work / "render")) for p in (work / "render").rglob("*.yaml"))
    runs["delete again"] = ansible_playbook(AZIMUTH, dict(variables, cluster_state="absent"), env)
    return {"runs": runs, "secrets": secrets, "manifests": manifests, "remaining": remaining}


def test_render_creates_the_platform_with_derived_names_labels_and_user(rendered):
    proc, recap = rendered["runs"]["create"]
    assert proc.returncode == 0 and recap["changed"] > 0, proc.stdout[-3000:]
    assert "platform 'azt' (id azt-static-0001): site in namespace slurm-azt-static-0001" in proc.stdout
    manifests = rendered["manifests"]
    assert "_cluster/namespace-slurm-azt-static-0001.yaml" in manifests
    for path, doc in manifests.items():
        labels = doc["metadata"].get("labels", {})
        assert labels.get("azimuth.stackhpc.com/cluster-id") == "azt-static-0001", path
        assert labels.get("app.kubernetes.io/instance") == "azt", path
    users = manifests["slurm-azt-static-0001/configmap-slurm-users.yaml"]["data"]
    assert users["passwd"] == "azimuth:*:2000:2000::/home/azimuth:/bin/bash\n"
    assert users["group"] == "azimuth:x:2000:\n"
    assert users["azimuth.authorized_keys"].strip() == SSH_KEY
    assert "ClusterName=azt" in manifests["slurm-azt-static-0001/configmap-slurm-config.yaml"]["data"]["slurm.conf"]


def test_render_outputs_hold_the_login_address_and_no_secret(rendered):
    proc, _recap = rendered["runs"]["create"]
    outputs = printed_outputs(proc.stdout)
    assert outputs == {"cluster_name": "azt", "namespace": "slurm-azt-static-0001", "workers": 3,
                       "login_user": "azimuth", "login_port": 30024, "login_host": "192.0.2.7",
                       "ssh_command": "ssh -p 30024 azimuth@192.0.2.7", "portal_url": "http://192.0.2.7:30025"}
    # the outputs task is the last task that ran
    assert proc.stdout.rindex("TASK [") == proc.stdout.index("TASK [Outputs]")
    secrets = rendered["secrets"]
    assert len(secrets) >= 3, secrets.keys()
    printed = json.dumps(outputs)
    for name, values in secrets.items():
        for value in values:
            for piece in [value] + [line for line in value.splitlines() if len(line.strip()) >= 12]:
                assert piece.strip() not in printed, name
                assert piece.strip() not in proc.stdout, name


def test_render_delete_removes_everything_and_a_second_delete_changes_nothing(rendered):
    proc, recap = rendered["runs"]["delete"]
    assert proc.returncode == 0 and recap["changed"] > 0, proc.stdout[-3000:]
    assert "): delete in namespace slurm-azt-static-0001" in proc.stdout
    assert printed_outputs(proc.stdout) == {}
    assert rendered["remaining"] == [], "teardown_delete_volumes defaults to true for Azimuth"
    proc, recap = rendered["runs"]["delete again"]
    assert proc.returncode == 0 and recap["changed"] == 0, proc.stdout[-3000:]
    assert printed_outputs(proc.stdout) == {}
