# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validation layer (plugins/plugin_utils/_inputs.py): complete, and safe against hostile strings.

Property-based (Hypothesis, derandomized: the same examples on every run): for every string of every
role's argument spec, a hostile value either fails with a problem that names the variable and the rule,
or is accepted and reads back unchanged from the file it is written to: slurm.conf rendered by the real
template and read with Slurm's tokenizing rules, the users file split as the entrypoint splits it, an
authorized_keys line read by ssh-keygen.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import glob
import os
import re
import subprocess

import jinja2
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.hpc.slurm_k8s.plugins.filter.slurm_conf import FilterModule as SlurmConfFilters
from ansible_collections.hpc.slurm_k8s.plugins.plugin_utils import _inputs

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
PROPERTY = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

# Characters that break files and manifests, plus ordinary ones, so that accepted values occur too.
HOSTILE = st.text(alphabet=st.sampled_from(list("\n\r\x00\t #=:,\"'\\[]/{}$`;|") + ["é", "\u202e", "ü"]
                                           + list("abcXYZ019_-.")), max_size=40) \
    | st.text(max_size=20) | st.just("a" * 5000) | st.sampled_from(["", " ", "\n", "ok", "ok\nSlurmUser=root"])


def specs():
    options = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml"))):
        role = path.split(os.sep)[-3]
        for entry in yaml.safe_load(open(path))["argument_specs"].values():
            for name, option in (entry.get("options") or {}).items():
                options[name] = dict(option, role=role)
    return options


SPECS = specs()
STRINGS = sorted(name for name, option in SPECS.items() if option.get("type", "str") in ("str", "path")
                 and "choices" not in option)
DICTS = sorted(name for name, option in SPECS.items() if option.get("type") == "dict")
DICT_LISTS = sorted(name for name, option in SPECS.items() if option.get("type") == "list"
                    and option.get("elements") == "dict")
STRING_LISTS = sorted(name for name, option in SPECS.items() if option.get("type") == "list"
                      and option.get("elements") == "str" and "choices" not in option)


def problems_of(name, value):
    return [problem for problem in _inputs.check({name: value}) if problem.where.startswith(name)]


# --- completeness -------------------------------------------------------------------------------

def test_every_variable_of_every_role_has_a_rule_and_every_rule_a_variable():
    assert sorted(set(SPECS) - set(_inputs.RULES)) == []
    assert sorted(set(_inputs.RULES) - set(SPECS)) == []


def test_the_role_outputs_are_exactly_the_public_facts_the_roles_set():
    public = set()

    def walk(node):
        if isinstance(node, dict):
            facts = node.get("ansible.builtin.set_fact")
            if isinstance(facts, dict):
                public.update(facts)
            if "hpc.slurm_k8s.cluster_model" in node:  # its result's ansible_facts
                public.add("cluster_model")
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)
    # the roles' facts, and those the playbooks set for the roles (site.yml: cluster_preflight_passed)
    for path in glob.glob(os.path.join(ROOT, "roles", "*", "tasks", "*.yml")) + glob.glob(os.path.join(ROOT, "playbooks", "*.yml")):
        walk(yaml.safe_load(open(path)))
    for path in glob.glob(os.path.join(ROOT, "roles", "*", "vars", "main.yml")):
        public.update(name for name in (yaml.safe_load(open(path)) or {}) if not name.startswith("_"))
    public = {name for name in public if name.startswith(_inputs.PREFIXES) and name not in SPECS}
    assert sorted(public - _inputs.ROLE_OUTPUTS) == []
    assert sorted(_inputs.ROLE_OUTPUTS - public) == []


def test_the_defaults_of_every_role_pass():
    values = {}
    for path in glob.glob(os.path.join(ROOT, "roles", "*", "defaults", "main.yml")):
        for name, value in (yaml.safe_load(open(path)) or {}).items():
            # templated defaults are checked after templating by every site.yml run of tests/static
            if "{{" not in yaml.safe_dump(value):
                values[name] = value
    assert [str(p) for p in _inputs.check(values)] == []


# --- the cases of the issue, one rule per message ---------------------------------------------------

@pytest.mark.parametrize("values,where,rule", [
    ({"config_slurm_conf": {"SlurmctldDebug": "info\nSlurmUser=root\nPrologSlurmctld=/tmp/x"}},
     "config_slurm_conf['SlurmctldDebug']", "line break"),
    ({"config_nodes": [{"NodeName": "x State=FUTURE"}]}, "config_nodes[0]['NodeName']", "a space"),
    ({"config_partitions": [{"PartitionName": "p", "Nodes": "ALL", "MaxTime": "1#"}]},
     "config_partitions[0]['MaxTime']", "'#'"),
    ({"slurmdbd_conf": {"DebugLevel": "info\\"}}, "slurmdbd_conf['DebugLevel']", "backslash"),
    ({"config_cgroup_conf": {"Bad Key": "x"}}, "config_cgroup_conf key 'Bad Key'", "Slurm parameter name"),
    ({"config_users": [{"name": "alice", "uid": 2000, "shell": "/bin/bash\nbob:3000:3000:/bin/sh"}]},
     "config_users[0].shell", "line break"),
    ({"config_users": [{"name": "alice", "uid": 2000, "authorized_keys": [
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIO5Y9dbXOf0Xjwv1kYBWiN6Cz6/MYqPWzPfgN7c8FxQO a\nssh-rsa AAAA b"]}]},
     "config_users[0].authorized_keys[0]", "line break"),
    ({"config_users": [{"name": "alice", "uid": 2000, "authorized_keys": [
        'command="/bin/sh" ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIO5Y9dbXOf0Xjwv1kYBWiN6Cz6/MYqPWzPfgN7c8FxQO']}]},
     "config_users[0].authorized_keys[0]", "options such as"),
    ({"slurmd_wait_timeout": -5}, "slurmd_wait_timeout", "within 1-604800"),
    ({"slurmd_replicas": 100000}, "slurmd_replicas", "within 0-65533"),
    ({"slurmd_replicas": 2000, "config_slurm_conf_default": {"MaxNodeCount": 1024}}, "slurmd_replicas",
     "at most MaxNodeCount"),
    ({"storage_class": "Fast_SSD"}, "storage_class", "DNS-1123 subdomain"),
    ({"cluster_labels": {"team": "a b"}}, "cluster_labels['team']", "label value"),
    ({"login_service_annotations": {"bad key!": "x"}}, "login_service_annotations annotation 'bad key!'",
     "label key"),
    ({"database_external_password": "pa ss"}, "database_external_password", "secret and not shown"),
    # the power program sends a token: plain http only to the loopback
    ({"powersave_api_server": "http://api.example.org:6443"}, "powersave_api_server", "http only to 127.0.0.1"),
    ({"powersave_groups": [{"name": "b", "count": 1, "node_conf": {"Gres": "gpu:1\nNodeName=evil"}}]},
     "powersave_groups[0].node_conf['Gres']", "line break"),
    # slurmrestd: a port of a Slurm daemon, one node port for two Services, tokens that never live
    ({"slurmrestd_port": 6817}, "slurmrestd_port", "6817 is slurmctld's"),
    ({"slurmrestd_port": 80}, "slurmrestd_port", "within 1024-65535"),
    ({"slurmrestd_node_port": 30022, "login_node_port": 30022}, "slurmrestd_node_port", "must differ from login_node_port"),
    ({"slurmrestd_token_lifespan": 0}, "slurmrestd_token_lifespan", "within 1-"),
    ({"slurmrestd_token_lifespan": -60}, "slurmrestd_token_lifespan", "within 1-"),
    ({"slurmrestd_token_lifespan": 3600, "slurmrestd_token_renew_before": 3600}, "slurmrestd_token_renew_before",
     "shorter than slurmrestd_token_lifespan"),
    ({"slurmrestd_token_user": "Alice Smith"}, "slurmrestd_token_user", "user name"),
    ({"config_users": [{"name": "slurmrestd", "uid": 2000}]}, "config_users[0] (slurmrestd).name", "image's own users"),
    ({"config_users": [{"name": "games", "uid": 2000}]}, "config_users[0] (games).name", "image's own users"),
    ({"config_users": [{"name": "alice", "uid": 64030}]}, "config_users[0] (alice).uid", "the image's slurm id"),
    ({"config_users": [{"name": "alice", "uid": 2000, "gid": 65534}]}, "config_users[0] (alice).gid",
     "the image's nobody/nogroup id"),
])
def test_a_hostile_value_fails_with_the_variable_and_the_rule(values, where, rule):
    problems = _inputs.check(values)
    assert [p for p in problems if p.where == where and rule in p.rule], [str(p) for p in problems]
    # a secret is never repeated
    if "database_external_password" in values:
        assert all(values["database_external_password"] not in str(p) for p in problems)


ALICE = {"name": "alice", "uid": 2001}


@pytest.mark.parametrize("values,problem", [
    ({"config_accounts": [{"name": "physics", "qos": ["normal", "gpu2"]}]},
     "config_accounts[physics].qos: unknown QoS gpu2 (list it in config_qos)"),
    ({"config_qos": [{"name": "gpu", "grp_tres": "gres/gpu=8"}]}, "config_qos[gpu].grp_tres: unknown TRES gres/gpu"),
    ({"config_accounts": [{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}]},
     "config_accounts[a].parent: the parents form a cycle (a -> b -> a)"),
    ({"config_users": [dict(ALICE, account="physics")]},
     "config_users[alice]: account physics does not exist (list it in config_accounts)"),
    ({"config_qos": [{"name": "debug", "max_wall": "half an hour"}]}, "config_qos[debug].max_wall: 'half an hour' is not"),
    ({"config_qos": [{"name": "debug", "colour": "red"}]}, "config_qos[0] key 'colour': is not a known field"),
    ({"config_users": [dict(ALICE, admin_level="root")]}, "config_users[0].admin_level: must be none, operator"),
    ({"config_accounts": [{"name": "physics"}], "config_slurm_conf": {"AccountingStorageType": "accounting_storage/none"}},
     "config_accounts: needs slurmdbd accounting"),
])
def test_accounting_variables_are_planned_against_an_empty_database(values, problem):
    assert any(str(p).startswith(problem) for p in _inputs.check(values)), [str(p) for p in _inputs.check(values)]


def test_accounting_variables_that_slurm_accepts_pass():
    assert _inputs.check({
        "config_slurm_conf": {"AccountingStorageTRES": "gres/gpu"},
        "config_qos": [{"name": "gpu", "grp_tres": "gres/gpu=8"}, {"name": "debug", "max_wall": 30, "flags": ["DenyOnLimit"]}],
        "config_accounts": [{"name": "Physics", "qos": ["normal", "gpu", "debug"], "default_qos": "normal"},
                            {"name": "theory", "parent": "physics", "fairshare": "parent"}],
        # the default account (users) is created for the users that name it or no account
        "config_users": [dict(ALICE, account="theory", accounts=["users"]), {"name": "bob", "uid": 2002}],
    }) == []


# the portal: a cluster whose workers have 2 CPUs and 2048 MiB (RealMemory 1843 MB), partition compute (12 h)
HASH = "$2b$12$" + "a" * 53
PORTAL = {
    "cluster_portal_enabled": True, "portal_auth": "local",
    "config_users": [ALICE, {"name": "bob", "uid": 2002}],
    "portal_users": [{"name": "alice", "password_hash": HASH}],
    "config_partitions": [{"PartitionName": "compute", "Nodes": "ALL", "Default": True, "MaxTime": "12:00:00"},
                          {"PartitionName": "short", "Nodes": "ALL", "MaxTime": "30", "MaxMemPerNode": 1024}],
    "slurmd_cpus": 2, "slurmd_memory_mib": 2048, "slurmd_real_memory_percent": 90,
    "portal_job_options": {"partitions": [], "cpus": {"default": 1, "max": 2}, "memory_mb": {"default": 512, "max": 1843},
                           "time_minutes": {"default": 60, "max": 720}},
}
OIDC = {"authorize_url": "https://idp.example.org/auth", "token_url": "https://idp.example.org/token",
        "userdata_url": "https://idp.example.org/userinfo", "callback_url": "https://hpc.example.org/hub/oauth_callback",
        "client_id": "slurm-portal", "client_secret_secret": "portal-oidc", "client_secret_key": "client-secret",
        "username_claim": "preferred_username", "scope": ["openid"], "allowed_users": []}


def _portal(**changes):
    values = dict(PORTAL)
    for name, value in changes.items():
        values[name] = dict(values[name], **value) if isinstance(values.get(name), dict) and name != "portal_oidc" else value
    return values


def test_the_portal_settings_that_fit_the_cluster_pass():
    assert [str(p) for p in _inputs.check(PORTAL)] == []
    assert [str(p) for p in _inputs.check(_portal(portal_auth="oidc", portal_users=[], portal_oidc=OIDC))] == []
    # off: nothing of the portal is compared with the cluster
    assert [str(p) for p in _inputs.check(_portal(cluster_portal_enabled=False, portal_users=[]))] == []


@pytest.mark.parametrize("values,problem", [
    (_portal(portal_users=[]), "portal_users: must list at least one user with a password hash when portal_auth is local"),
    (_portal(portal_users=[{"name": "carol", "password_hash": HASH}]), "portal_users[0] (carol): is not a user of config_users"),
    (_portal(portal_users=[{"name": "alice", "password_hash": "hunter2"}]), "portal_users[0].password_hash: must be a bcrypt hash"),
    (_portal(portal_users=[{"name": "alice"}]), "portal_users[0]: must set password_hash"),
    (_portal(portal_auth="oidc", portal_oidc=dict(OIDC, client_secret_secret="")),
     "portal_oidc.client_secret_secret: must be set when portal_auth is oidc"),
    (_portal(portal_auth="oidc", portal_oidc=dict(OIDC, token_url="")), "portal_oidc.token_url: must be set when portal_auth is oidc"),
    (_portal(portal_auth="oidc", portal_oidc=dict(OIDC, token_url="ftp://idp")), "portal_oidc.token_url: must be empty or an http(s) URL"),
    (_portal(portal_auth="oidc", portal_oidc=dict(OIDC, allowed_users=["mallory"])),
     "portal_oidc.allowed_users[0] (mallory): is not a user of config_users"),
    (_portal(portal_job_options={"partitions": ["gpu"]}), "portal_job_options.partitions[0] (gpu): is not a partition of this cluster (compute, short)"),
    (_portal(portal_job_options={"cpus": {"default": 1, "max": 3}}),
     "portal_job_options.cpus.max: 3 CPUs exceeds partition compute (the CPUs of its nodes: 2 CPUs)"),
    (_portal(portal_job_options={"memory_mb": {"default": 512, "max": 2048}}),
     "portal_job_options.memory_mb.max: 2048 MB exceeds partition compute (the RealMemory of its nodes: 1843 MB)"),
    (_portal(portal_job_options={"time_minutes": {"default": 60, "max": 721}}),
     "portal_job_options.time_minutes.max: 721 minutes exceeds partition compute (its MaxTime: 720 minutes)"),
    (_portal(portal_job_options={"partitions": ["compute", "short"], "time_minutes": {"default": 20, "max": 60}}),
     "portal_job_options.time_minutes.max: 60 minutes exceeds partition short (its MaxTime: 30 minutes)"),
    (_portal(portal_job_options={"partitions": ["short"], "time_minutes": {"default": 20, "max": 30}}),
     "portal_job_options.memory_mb.max: 1843 MB exceeds partition short (its MaxMemPerNode: 1024 MB)"),
    (_portal(portal_job_options={"cpus": {"default": 2, "max": 1}}), "portal_job_options.cpus.default: must be at most its max (1), got 2"),
    (_portal(portal_job_options={"cpus": {"default": 1}}), "portal_job_options.cpus: must set max"),
    (_portal(portal_node_port=30022, login_node_port=30022), "portal_node_port: must differ from login_node_port (30022)"),
])
def test_portal_settings_that_do_not_fit_the_cluster_are_refused_naming_the_variable(values, problem):
    problems = [str(p) for p in _inputs.check(values)]
    assert any(p.startswith(problem) for p in problems), problems


def test_a_portal_password_hash_is_never_shown():
    problems = [str(p) for p in _inputs.check(_portal(portal_users=[{"name": "alice", "password_hash": "$2b$12$short"}]))]
    assert problems and all("$2b$12$short" not in p for p in problems), problems


def test_the_power_program_may_reach_a_local_api_over_http():
    assert _inputs.check({"powersave_api_server": "http://127.0.0.1:45055"}) == []
    assert _inputs.check({"powersave_api_server": "https://kubernetes.default.svc"}) == []


def test_a_typo_of_a_variable_suggests_the_right_name():
    known = set(SPECS)
    problems = _inputs.unknown_variables(["slurmd_replica", "slurmd_replicas", "ansible_host", "other"], known)
    assert [str(p) for p in problems] == [
        "slurmd_replica: is not a variable of any hpc.slurm_k8s role (did you mean slurmd_replicas? it would be "
        "ignored; see the roles' meta/argument_specs.yml)"]


def test_each_problem_states_one_rule():
    problems = _inputs.check({"slurmd_replicas": -1, "slurmd_cpus": 0, "storage_class": "A B",
                              "config_slurm_conf": {"A": "x y", "B": "z#"}})
    assert len(problems) == 5, problems
    assert all(";" not in p.rule.split(":")[0] for p in problems)


# --- properties: hostile strings ------------------------------------------------------------------

@pytest.mark.parametrize("name", STRINGS)
@PROPERTY
@given(value=HOSTILE)
def test_a_hostile_string_is_refused_by_name_or_contains_no_line_break(name, value):
    problems = problems_of(name, value)
    if problems:
        assert all(p.where.startswith(name) and p.rule for p in problems)
        if name in _inputs.SECRET_VARIABLES and len(value) >= 4:
            assert all(value not in str(p) for p in problems)
    else:
        assert not re.search(r"[\x00\n\r]", value), "%s accepted %r" % (name, value)


@pytest.mark.parametrize("name", STRING_LISTS)
@PROPERTY
@given(value=st.lists(HOSTILE, max_size=3))
def test_a_hostile_list_item_is_refused_by_name_or_contains_no_line_break(name, value):
    problems = problems_of(name, value)
    if problems:
        assert all(re.match(re.escape(name) + r"\[\d+\]", p.where) for p in problems), problems
    else:
        assert not any(re.search(r"[\x00\n\r]", item) for item in value)


def strings_in(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings_in(key)
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)


FIELDS = st.sampled_from(["name", "uid", "shell", "authorized_keys", "key", "operator", "value", "effect",
                          "count", "partition", "node_conf", "NodeName", "PartitionName", "NodeSet", "Nodes",
                          "requests", "limits", "cpu", "memory", "ansible_connection"]) | HOSTILE
NESTED = st.recursive(HOSTILE | st.integers(-2, 3) | st.booleans(),
                      lambda inner: st.lists(inner, max_size=2) | st.dictionaries(FIELDS, inner, max_size=3),
                      max_leaves=6)


@pytest.mark.parametrize("name", DICTS + DICT_LISTS)
@PROPERTY
@given(data=st.data())
def test_a_hostile_mapping_is_refused_by_name_or_holds_no_line_break(name, data):
    """Every dict variable (and list of dicts), with hostile keys and values at any depth: the problems
    name the variable, or nothing accepted holds a line break or NUL. Free-text file contents
    (config_extra_files values) and annotation values are the exceptions: they may hold line breaks."""
    entry = st.dictionaries(FIELDS, NESTED, max_size=3)
    value = data.draw(st.lists(entry, max_size=2) if name in DICT_LISTS else entry)
    problems = problems_of(name, value)
    if problems:
        assert all(p.where.startswith(name) and p.rule for p in problems), problems
    elif name not in ("config_extra_files", "login_service_annotations", "resources_definitions",
                      "cluster_slurmctld_connection", "upgrade_slurmdbd_connection"):
        assert not any(re.search(r"[\x00\n\r]", text) for text in strings_in(value)), (name, value)


def slurm_parse(text):
    """slurm.conf as Slurm's parser (src/common/parse_config.c) reads it: '\\' at the end of a line joins
    the next one, '#' starts a comment, white space separates key=value pairs; quotes group a value."""
    text = re.sub(r"\\\n", "", text)
    lines = []
    for line in text.split("\n"):
        line = line.split("#", 1)[0]
        pairs = []
        for token in re.findall(r'(?:[^\s"]|"[^"]*")+', line):
            key, _sep, value = token.partition("=")
            pairs.append((key, value.replace('"', "")))
        if pairs:
            lines.append(pairs)
    return lines


def render_slurm_conf(conf, partitions):
    def combine(*dicts):
        merged = {}
        for item in dicts:
            merged.update(item)
        return merged
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(ROOT, "roles", "config", "templates")),
                             trim_blocks=True)
    env.filters["combine"] = combine
    env.filters.update({"hpc.slurm_k8s." + name: function for name, function in SlurmConfFilters().filters().items()})
    return env.get_template("slurm.conf.j2").render(
        # roles/config/vars/main.yml merges the defaults and the overrides (no power-save keys here)
        _config_slurm_conf=combine({"ClusterName": "slurm"}, conf), config_nodesets=[],
        config_nodes=[], config_partitions=partitions, _config_burst_nodes=[], _config_burst_partitions=[],
        cluster_name="slurm")


SLURM_VALUE = HOSTILE | st.integers(-5, 5) | st.booleans() | st.lists(HOSTILE, min_size=1, max_size=3)


def slurm_text(value):
    if value is True or value is False:
        return "YES" if value else "NO"
    if isinstance(value, list):
        return ",".join(slurm_text(item) for item in value)
    return str(value)


@PROPERTY
@given(key=st.sampled_from(["SlurmctldDebug", "SchedulerParameters", "Bad Key", "A#B", "X\nY"]), value=SLURM_VALUE)
def test_an_accepted_slurm_conf_value_reads_back_from_the_rendered_file(key, value):
    conf = {key: value}
    if _inputs.check({"config_slurm_conf": conf}):
        return
    parsed = slurm_parse(render_slurm_conf(conf, []))
    assert ["ClusterName", "slurm"] in [list(pair) for line in parsed for pair in line]
    assert [(key, slurm_text(value))] in parsed, parsed


@PROPERTY
@given(name=HOSTILE, extra=SLURM_VALUE)
def test_an_accepted_partition_line_reads_back_as_one_line(name, extra):
    partition = {"PartitionName": name, "Nodes": "ALL", "MaxTime": extra}
    if _inputs.check({"config_partitions": [partition]}):
        return
    parsed = slurm_parse(render_slurm_conf({}, [partition]))
    assert [("PartitionName", name), ("Nodes", "ALL"), ("MaxTime", slurm_text(extra))] in parsed, parsed


@PROPERTY
@given(name=HOSTILE, shell=HOSTILE)
def test_an_accepted_user_reads_back_from_the_users_file(name, shell):
    user = {"name": name, "uid": 2000, "shell": shell}
    if _inputs.check({"config_users": [user]}):
        return
    line = "%s:%d:%d:%s\n" % (name, 2000, 2000, shell)   # roles/config/templates/users.j2
    assert line.count("\n") == 1 and line.rstrip("\n").split(":") == [name, "2000", "2000", shell]


@pytest.fixture(scope="module")
def public_key(tmp_path_factory):
    path = tmp_path_factory.mktemp("keys") / "id"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(path)], check=True)
    key = path.with_suffix(".pub").read_text().split()
    fingerprint = subprocess.run(["ssh-keygen", "-l", "-f", str(path.with_suffix(".pub"))], check=True,
                                 capture_output=True, text=True).stdout.split()[1]
    return key[0], key[1], fingerprint


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prefix=st.sampled_from(["", 'command="/bin/sh" ', "from=\"*\" ", " "]), comment=HOSTILE,
       tamper=st.sampled_from(["", "x", "=", "AAAA"]))
def test_an_accepted_authorized_key_is_one_key_for_ssh_keygen(public_key, tmp_path_factory, prefix, comment, tamper):
    kind, blob, fingerprint = public_key
    entry = "%s%s %s%s %s" % (prefix, kind, blob, tamper, comment)
    if _inputs.check({"config_users": [{"name": "alice", "uid": 2000, "authorized_keys": [entry]}]}):
        return
    path = tmp_path_factory.mktemp("ak") / "authorized_keys"
    path.write_text(entry + "\n")   # the entrypoint installs the users' entries, one per line
    listed = subprocess.run(["ssh-keygen", "-l", "-f", str(path)], capture_output=True, text=True, check=False)
    assert listed.returncode == 0, (entry, listed.stderr)
    assert [line.split()[1] for line in listed.stdout.splitlines()] == [fingerprint], (entry, listed.stdout)


def test_a_key_with_a_mismatched_type_is_refused():
    blob = base64.b64encode(b"\x00\x00\x00\x07ssh-rsa" + b"\x00\x00\x00\x01\x03" * 2).decode()
    problems = _inputs.check({"config_users": [{"name": "a", "uid": 2000, "authorized_keys": ["ssh-ed25519 " + blob]}]})
    assert [p.rule for p in problems] == ["is a ssh-rsa key labelled ssh-ed25519"]


@PROPERTY
@given(value=NESTED)
def test_no_value_of_any_type_makes_the_checks_crash(value):
    """The argument specs catch wrong types first; the rules must still report, not raise, on any value."""
    for name in _inputs.RULES:
        _inputs.check({name: value, "config_slurm_conf": value, "powersave_group_defaults": value,
                       "powersave_groups": [value], "config_users": [value], "slurmd_replicas": value})
