# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm's parameter table (plugins/plugin_utils/_slurm_parameters.py) and its check of the override dicts.

The table's agreement with a real Slurm parser is tier T2 (tests/integration/test_slurm_parameters.py). Here:
the messages (dict, key, value, what Slurm accepts, the majors), did-you-mean, replaced and defunct keys, keys
of some majors only, the rules between keys, and a property over the whole table (Hypothesis, derandomized):
no integer outside a parameter's type or documented bounds passes the collection's check, so none reaches a
rendered file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.hpc.slurm_k8s.plugins.filter.slurm_versions import SUPPORTED_MAJORS
from ansible_collections.hpc.slurm_k8s.plugins.plugin_utils import _inputs, _slurm_parameters

SUPPORTED = list(SUPPORTED_MAJORS)
TABLE = json.load(open(os.path.join(os.path.dirname(_slurm_parameters.__file__), "slurm_parameters.json")))
_TYPE_RANGE = {"uint16": (0, 2 ** 16 - 1), "uint32": (0, 2 ** 32 - 1), "uint64": (0, 2 ** 64 - 1),
               "long": (-2 ** 63, 2 ** 63 - 1)}


def said(values, majors=None, strict=False):
    return [str(problem) for problem in _inputs.slurm_parameter_problems(values, majors or SUPPORTED, strict)]


def test_the_table_covers_each_file_and_major():
    assert set(TABLE["files"]) == {"slurm.conf", "cgroup.conf", "gres.conf", "slurmdbd.conf"}
    assert set(SUPPORTED) <= set(TABLE["tags"]), "a supported major has no table: run make slurm-parameters"
    for name, keys in TABLE["files"].items():
        for major in TABLE["tags"]:
            having = [key for key, variants in keys.items() if any(major in v["majors"] for v in variants)]
            assert len(having) > {"slurm.conf": 200, "cgroup.conf": 15, "gres.conf": 8, "slurmdbd.conf": 50}[name], \
                (name, major, len(having))


@pytest.mark.parametrize("values,expected", [
    # out of the parser's type, and below a documented minimum
    ({"config_slurm_conf": {"KillWait": -5}},
     ["config_slurm_conf['KillWait']: Slurm 24.11 to 26.05 accept an integer from 0 to 65533 here, got -5"]),
    ({"config_slurm_conf": {"SchedulerTimeSlice": 0}},
     ["config_slurm_conf['SchedulerTimeSlice']: Slurm 24.11 to 26.05 accept an integer from 5 to 65533 here, got 0"]),
    ({"config_slurm_conf": {"MinJobAge": 1}},
     ["config_slurm_conf['MinJobAge']: Slurm 24.11 to 26.05 accept an integer from 2 to 4294967295 here, got 1"]),
    ({"config_slurm_conf": {"KillWait": "UNLIMITED"}},
     ["config_slurm_conf['KillWait']: Slurm 24.11 to 26.05 accept an integer from 0 to 65533 (to Slurm UNLIMITED "
      "is 65535) here, got 'UNLIMITED'"]),
    # (a fuzz run against Slurm 22.05's parser found it: the unsigned types refuse any leading '-')
    ({"config_slurm_conf": {"KillWait": "-0"}},
     ["config_slurm_conf['KillWait']: Slurm 24.11 to 26.05 accept an integer from 0 to 65533 here, got '-0'"]),
    ({"config_slurm_conf": {"DisableRootJobs": "maybe"}},
     ["config_slurm_conf['DisableRootJobs']: Slurm 24.11 to 26.05 accept a boolean (true/false, or YES/NO) here, "
      "got 'maybe'"]),
    # accepted as Slurm reads them: any case of the key, hex, YES/NO, UNLIMITED where the type allows it
    ({"config_slurm_conf": {"killwait": 60, "MaxJobCount": "0x1000", "DisableRootJobs": True,
                            "InactiveLimit": 0, "MaxArraySize": 4000001}}, []),
    # names
    ({"config_slurm_conf": {"KilWait": 30}},
     ["config_slurm_conf key 'KilWait': is not a slurm.conf parameter of Slurm 22.05 to 26.05; did you mean KillWait?"]),
    ({"config_slurm_conf": {"ControlMachine": "head"}},
     ["config_slurm_conf key 'ControlMachine': is an old name that Slurm 24.11 to 26.05 keep only for old files: use "
      "SlurmctldHost (ignored once SlurmctldHost is set, which the collection does)"]),
    ({"config_cgroup_conf": {"CgroupAutomount": True}},
     ["config_cgroup_conf key 'CgroupAutomount': is defunct in Slurm 24.11 to 26.05: its daemons ignore it and log "
      "an error; remove it"]),
    ({"slurmdbd_conf": {"PurgeJobMonths": 12}},
     ["slurmdbd_conf key 'PurgeJobMonths': is an old name that Slurm 24.11 to 26.05 keep only for old files: use "
      "PurgeJobAfter (e.g. 12months)"]),
    ({"config_extra_files": {"gres.conf": "AutoDetect=off\nName=gpu File=/dev/nvidia0 Count=1 Typo=1 # Bogus=2\n"}},
     ["config_extra_files['gres.conf'] line 2 Typo: is not a gres.conf parameter of Slurm 22.05 to 26.05; did you "
      "mean Type?"]),
    # a key of 22.05 only: not of any supported major
    ({"config_slurm_conf": {"PowerPlugin": "power/none"}},
     ["config_slurm_conf key 'PowerPlugin': is defunct in Slurm 24.11 to 26.05: its daemons ignore it and log an "
      "error; remove it"]),
    # rules between keys, named after the key the override sets
    ({"config_slurm_conf": {"MaxJobId": 100, "FirstJobId": 10}}, []),
    ({"config_slurm_conf": {"MaxJobId": 5}, "config_slurm_conf_default": {"FirstJobId": 10}},
     ["config_slurm_conf['MaxJobId']: FirstJobId (10) must not be above MaxJobId (5): Slurm stops at "
      "'FirstJobId > MaxJobId'"]),
    ({"config_slurm_conf": {"SlurmSchedLogLevel": 1}},
     ["config_slurm_conf['SlurmSchedLogLevel']: SlurmSchedLogLevel needs SlurmSchedLogFile: Slurm stops at "
      "'SlurmSchedLogLevel requires SlurmSchedLogFile value'"]),
    ({"config_slurm_conf_default": {"MaxNodeCount": 1024, "SelectType": "select/cons_tres"},
      "config_slurm_conf": {"SelectType": "select/linear"}},
     ["config_slurm_conf['SelectType']: MaxNodeCount needs SelectType=select/cons_tres: Slurm stops at 'MaxNodeCount "
      "only compatible with cons_tres'"]),
])
def test_problems_name_the_dict_the_key_the_value_and_what_slurm_accepts(values, expected):
    assert said(values) == expected


def test_a_key_of_some_supported_majors_is_judged_by_the_images_majors():
    # before the images are read: a parameter of 25.11 and 26.05 passes (a cluster may run either)
    assert said({"config_slurm_conf": {"HealthCheckTimeout": 30}}) == []
    # once they are: named with the majors that lack it and those that have it
    assert said({"config_slurm_conf": {"HealthCheckTimeout": 30}}, ["24.11", "26.05"], strict=True) == [
        "config_slurm_conf key 'HealthCheckTimeout': is not a slurm.conf parameter of Slurm 24.11 (it is of 26.05)"]
    assert said({"config_slurm_conf": {"HealthCheckTimeout": 30}}, ["24.11"], strict=True) == [
        "config_slurm_conf key 'HealthCheckTimeout': is not a slurm.conf parameter of Slurm 24.11 (only of 26.05)"]


def test_what_only_some_majors_replace_or_ignore_is_refused_once_the_images_run_them():
    # JobContainerType: NamespaceType replaces it from 25.11 on (24.11 has no NamespaceType)
    job_container = {"config_slurm_conf": {"JobContainerType": "job_container/tmpfs"}}
    assert said(job_container) == []
    assert said(job_container, ["24.11"], strict=True) == []
    assert said(job_container, ["24.11", "26.05"], strict=True) == [
        "config_slurm_conf key 'JobContainerType': is an old name that Slurm 26.05 keeps only for old files: use "
        "NamespaceType"]
    # AccountingStorageUser: read by 24.11 and 25.05, defunct from 25.11 on
    user = {"config_slurm_conf": {"AccountingStorageUser": "slurm"}}
    assert said(user) == [] and said(user, ["25.05"], strict=True) == []
    assert said(user, ["25.11"], strict=True) == [
        "config_slurm_conf key 'AccountingStorageUser': is defunct in Slurm 25.11: its daemons ignore it and log an "
        "error; remove it"]


def test_a_newer_major_than_the_table_may_have_a_key_the_table_does_not_know():
    values = {"config_slurm_conf": {"SomeFutureKey": 1, "KillWait": -1}, "slurmctld_allow_newer_major": True}
    assert said(values) == ["config_slurm_conf['KillWait']: Slurm 24.11 to 26.05 accept an integer from 0 to 65533 "
                            "here, got -1"]


def test_the_collections_own_defaults_pass():
    # (the check over every role's defaults, with the roles' own templating: tests/static; these are the keys)
    import yaml
    root = os.path.join(os.path.dirname(_slurm_parameters.__file__), "..", "..")
    defaults = yaml.safe_load(open(os.path.join(root, "roles", "config", "defaults", "main.yml")))
    dbd = yaml.safe_load(open(os.path.join(root, "roles", "slurmdbd", "defaults", "main.yml")))
    conf = {key: (1 if "{{" in str(value) else value) for key, value in defaults["config_slurm_conf_default"].items()
            if "{{" not in str(value)}
    assert said({"config_slurm_conf_default": conf, "config_cgroup_conf_default": defaults["config_cgroup_conf_default"],
                 "slurmdbd_conf_default": {k: v for k, v in dbd["slurmdbd_conf_default"].items() if "{{" not in str(v)}},
                ["24.11", "26.05"], strict=True) == []


def _bounded_keys():
    keys = []
    for key, variants in sorted(TABLE["files"]["slurm.conf"].items()):
        for variant in variants:
            if variant["type"] in _TYPE_RANGE and not variant.get("defunct") and set(variant["majors"]) & set(SUPPORTED) \
                    and key not in _slurm_parameters.REPLACED["slurm.conf"]:
                keys.append((key, variant))
    return keys


BOUNDED = _bounded_keys()


@settings(max_examples=500, deadline=None, derandomize=True, database=None)
@given(st.sampled_from(BOUNDED), st.integers(min_value=-2 ** 66, max_value=2 ** 66) | st.integers(-10, 70000))
def test_no_value_outside_its_type_or_documented_bounds_passes(entry, value):
    key, variant = entry
    low, high = _TYPE_RANGE[variant["type"]]
    low, high = max(low, variant.get("min", low)), min(high, variant.get("max", high))
    majors = [major for major in variant["majors"] if major in SUPPORTED]
    problems = said({"config_slurm_conf": {key: value}}, majors, strict=True)
    values_problems = [text for text in problems if text.startswith("config_slurm_conf[%r]: Slurm " % key)]
    if low <= value <= high:
        assert values_problems == [], problems
    else:
        assert values_problems and all(repr(value) in text for text in values_problems), problems
        # and the collection's own gate, check_inputs, stops it before any file is rendered when no supported major
        # takes it (one that does, e.g. EpilogMsgTime=1000001 on 24.11, is judged against the images' majors)
        if not any(_within(other, value) for other in TABLE["files"]["slurm.conf"][key]
                   if set(other["majors"]) & set(SUPPORTED) and not other.get("defunct")):
            assert any(str(problem).startswith("config_slurm_conf[%r]" % key)
                       for problem in _inputs.check({"config_slurm_conf": {key: value}}))


def _within(variant, value):
    low, high = _TYPE_RANGE.get(variant["type"], (None, None))
    if low is None:
        return True
    return max(low, variant.get("min", low)) <= value <= min(high, variant.get("max", high))


def test_the_version_checks_filter_judges_the_majors_the_images_run():
    from ansible_collections.hpc.slurm_k8s.plugins.filter.slurm_parameters import slurm_parameter_problems
    overrides = {"config_slurm_conf": {"HealthCheckTimeout": 30}, "slurmdbd_conf": {}}
    assert slurm_parameter_problems(overrides, ["26.05"]) == []
    assert slurm_parameter_problems(overrides, ["24.11", "26.05"]) == [
        "config_slurm_conf key 'HealthCheckTimeout': is not a slurm.conf parameter of Slurm 24.11 (it is of 26.05)"]
    # a major newer than the table (slurmctld_allow_newer_major) is left to its daemons
    assert slurm_parameter_problems(overrides, ["27.05"]) == []


def test_the_documented_table_is_the_json_one():
    import importlib.util
    root = os.path.join(os.path.dirname(_slurm_parameters.__file__), "..", "..")
    spec = importlib.util.spec_from_file_location("slurm_parameters_tool", os.path.join(root, "tools", "slurm_parameters.py"))
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    with open(os.path.join(root, "docs", "slurm-parameters-table.md"), encoding="utf-8") as handle:
        assert handle.read() == tool.markdown(os.path.join(os.path.dirname(_slurm_parameters.__file__),
                                                           "slurm_parameters.json")), "run make slurm-parameters"
    assert tuple(TABLE["tags"]) == tool.MAJORS
