# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tier T2: the slurm.conf parameter table (plugins/plugin_utils/slurm_parameters.json) against the parser of
this host's real Slurm.

Slurm's own parser judges each candidate file: `scontrol show hostnames` reads and validates slurm.conf
(every key, every value, the checks that stop a daemon) without asking slurmctld; a file it cannot process
ends it with "fatal: Unable to process configuration file". For every integer and boolean parameter of the
host's major, each value the collection's check accepts must be one this parser accepts (nothing the
collection lets through stops a daemon), and each value outside the parser's own type (negative, too large,
not a number) must be refused by both. Hypothesis then draws further values (derandomized: the same ones on
every run) with the same property.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.hpc.slurm_k8s.plugins.filter.slurm_conf import slurm_conf_value
from ansible_collections.hpc.slurm_k8s.plugins.plugin_utils import _inputs, _slurm_parameters

# the keys of the collection's own slurm.conf that other keys depend on (MaxNodeCount needs cons_tres)
BASE_KEYS = {"ClusterName": "t2", "SlurmctldHost": "localhost", "SelectType": "select/cons_tres"}
BASE = "".join("%s=%s\n" % item for item in BASE_KEYS.items()) + "NodeName=n1 CPUs=1\nPartitionName=p Nodes=ALL\n"
_NUMERIC = ("uint16", "uint32", "uint64", "long")
_TYPE_MAX = {"uint16": 2 ** 16 - 1, "uint32": 2 ** 32 - 1, "uint64": 2 ** 64 - 1, "long": 2 ** 63 - 1}


@pytest.fixture(scope="module")
def host_major(tmp_path_factory):
    if not shutil.which("scontrol"):
        message = "Slurm's parser needs scontrol (make deps installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return _major(tmp_path_factory)


def _major(tmp_path_factory):
    # (scontrol wants a configuration even for -V)
    conf = tmp_path_factory.mktemp("slurm-version") / "slurm.conf"
    conf.write_text(BASE)
    printed = subprocess.run(["scontrol", "-V"], capture_output=True, text=True, check=True,
                             env=dict(os.environ, SLURM_CONF=str(conf))).stdout
    major = re.search(r"(\d\d\.\d\d)\.\d+", printed).group(1)
    assert major in _slurm_parameters.MAJORS, "the table has no Slurm %s (%s)" % (major, printed.strip())
    return major


@pytest.fixture(scope="module")
def parse(tmp_path_factory):
    """A function: whether this host's Slurm parser accepts slurm.conf with one more line, and its error."""
    directory = tmp_path_factory.mktemp("slurm-parameters")

    def parse_with(line):
        conf = Path(tempfile.mkstemp(dir=directory, suffix=".conf")[1])
        conf.write_text(BASE + line + "\n")
        done = subprocess.run(["scontrol", "show", "hostnames", "n1"], capture_output=True, text=True,
                              env=dict(os.environ, SLURM_CONF=str(conf)), timeout=60, check=False)
        conf.unlink()
        return done.returncode == 0 and "fatal" not in done.stderr, done.stderr.strip()
    return parse_with


def _variant(key, major):
    name, variants = _slurm_parameters._KEYS["slurm.conf"][key.lower()]
    return name, next(variant for variant in variants if major in variant["majors"])


def _collection_problems(key, value, major):
    """What the collection's check says of config_slurm_conf {key: value} over the base keys, for ``major``."""
    return _inputs.slurm_parameter_problems({"config_slurm_conf_default": BASE_KEYS, "config_slurm_conf": {key: value}},
                                            [major], strict=True)


def _typed_keys(major):
    keys = []
    for lower in sorted(_slurm_parameters._KEYS["slurm.conf"]):
        if not _slurm_parameters.has("slurm.conf", lower, major):
            continue
        name, variant = _variant(lower, major)
        if variant["type"] in _NUMERIC + ("boolean",) and not variant.get("defunct") \
                and name not in _slurm_parameters.REPLACED["slurm.conf"]:
            keys.append((name, variant))
    return keys


def test_the_host_parser_agrees_with_the_table_at_its_edges(host_major, parse):
    keys = _typed_keys(host_major)
    assert len(keys) > 60, "too few typed parameters in the table for %s: %d" % (host_major, len(keys))
    disagreements, accepted_count = [], 0
    for name, variant in keys:
        kind = variant["type"]
        if kind == "boolean":
            edges, refused = ["YES", "no", "true", "0"], ["maybe", "2"]
        else:
            low = max(variant.get("min", 0), 0 if kind != "long" else -5)
            high = min(variant.get("max", _TYPE_MAX[kind]), _TYPE_MAX[kind])
            edges = [low, high, str(low + 1)]
            # outside the parser's own type: a negative number for the unsigned ones, one past the largest, text
            refused = ([-1] if kind != "long" else []) + [_TYPE_MAX[kind] + 1, "ten"]
        for value in edges:
            if _collection_problems(name, value, host_major):
                continue  # (a rule between keys: FirstJobId at its largest is above MaxJobId's default)
            accepted_count += 1
            ok, error = parse("%s=%s" % (name, slurm_conf_value(value)))
            if not ok:
                disagreements.append("%s=%r accepted by the collection, refused by Slurm: %s" % (name, value, error))
        for value in refused:
            assert _collection_problems(name, value, host_major), "the collection accepts %s=%r" % (name, value)
            ok, _error = parse("%s=%s" % (name, slurm_conf_value(value)))
            if ok:
                disagreements.append("%s=%r refused by the collection, accepted by Slurm's parser" % (name, value))
    assert not disagreements, "\n".join(disagreements)
    # each key's edge values, not only the refusals, went to Slurm
    assert accepted_count >= 2 * len(keys), accepted_count


@settings(max_examples=400, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_generated_value_the_collection_accepts_stops_the_parser(host_major, parse, data):
    name, variant = data.draw(st.sampled_from(_typed_keys(host_major)))
    value = data.draw(st.one_of(st.integers(min_value=-2 ** 65, max_value=2 ** 65), st.integers(-3, 70000),
                                st.sampled_from(["UNLIMITED", "infinite", "0x10", "017", "-0", "+5", "08", "yes", "Off", "1.5", ""]),
                                st.booleans()))
    problems = _collection_problems(name, value, host_major)
    if problems:
        # the refusal names the dict and the key, and the value unless it is a rule between keys
        assert all(str(problem).startswith("config_slurm_conf[%r]" % name)
                   and (repr(value) in str(problem) or "Slurm stops at" in str(problem)) for problem in problems), problems
        return
    ok, error = parse("%s=%s" % (name, slurm_conf_value(value)))
    assert ok, "config_slurm_conf %s=%r passed the collection's check, but Slurm %s refuses it: %s" % (
        name, value, host_major, error)


# where Debian's packages put the host's plugins (the script finds it the same way when PluginDir is unset)
PLUGIN_DIR = "/usr/lib/x86_64-linux-gnu/slurm-wlm"
CHECK_SCRIPT = Path(__file__).resolve().parents[2] / "roles" / "config" / "files" / "check-slurm-conf.sh"


@pytest.mark.parametrize("extra,refusal", [
    ("", None),
    # the parser's own verdicts, in its words
    ("SlurmctldDebug=loud", "slurm.conf: scontrol: error: Invalid SlurmctldDebug loud"),
    ("KillWait=abc", 'slurm.conf: scontrol: error: KillWait value "abc" is not a valid number'),
    ("SlurmSchedLogLevel=1", "slurm.conf: scontrol: error: SlurmSchedLogLevel requires SlurmSchedLogFile value"),
    # plugins the host's Slurm does not have; `none` is no plugin
    ("SchedulerType=sched/nope", "slurm.conf: this image has no plugin sched/nope"),
    ("PreemptType=preempt/none\nJobCompType=jobcomp/none\nTaskPlugin=task/affinity", None),
    ("MpiDefault=nope", "slurm.conf: this image has no plugin mpi/nope"),
    # names as Slurm's interfaces take them: auth and cred plugins with or without their prefix; CredType
    # `slurm` (auth/slurm's credential) lives in auth_slurm.so, which 22.05 does not have (Slurm 23.11 on)
    ("AuthType=munge\nCredType=munge", None),
    ("AuthType=auth/munge\nCredType=cred/munge", None),
    ("CredType=cred/slurm", "slurm.conf: this image has no plugin auth/slurm (auth_slurm.so in "),
    ("CredType=slurm", "slurm.conf: this image has no plugin auth/slurm"),
    ("AuthAltTypes=auth/nope", "slurm.conf: this image has no plugin auth/nope"),
    # PluginDir as Slurm reads it: a list of directories (each must exist), each searched
    ("PluginDir=/tmp:" + PLUGIN_DIR, None),
    ("PluginDir=/tmp\nSchedulerType=sched/backfill", "slurm.conf: this image has no plugin sched/backfill"),
])
def test_the_check_a_new_slurm_conf_runs_in_each_image_asks_slurm(host_major, extra, refusal):
    """roles/config/files/check-slurm-conf.sh, which site.yml runs in a short-lived container of each Slurm image
    before a new slurm.conf reaches the cluster (tests/k8s/test_bad_input.py runs it there), on this host's Slurm."""
    candidate = BASE + "SelectType=select/cons_tres\n" + extra
    # (as in slurmctld's image, the one that loads AuthAltTypes)
    done = subprocess.run(["sh", str(CHECK_SCRIPT)], capture_output=True, text=True, timeout=60, check=False,
                          env=dict(os.environ, SLURM_CONF_CANDIDATE=candidate, SLURM_CONF_CHECK_AUTH_ALT_TYPES="yes"))
    if refusal is None:
        assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr
    else:
        assert done.returncode == 1 and refusal in done.stdout, done.stdout + done.stderr


def test_the_check_leaves_auth_alt_types_to_the_images_that_load_them():
    """AuthAltTypes are loaded by slurmctld and slurmdbd only (interfaces/auth.c): the node image, which lacks
    auth_jwt.so in a cluster whose slurmctld takes JWTs, is not refused for them."""
    candidate = BASE + "AuthAltTypes=auth/nope\n"
    done = subprocess.run(["sh", str(CHECK_SCRIPT)], capture_output=True, text=True, timeout=60, check=False,
                          env=dict(os.environ, SLURM_CONF_CANDIDATE=candidate))
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr
