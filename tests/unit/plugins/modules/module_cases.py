# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Run a module against YAML test cases that list the exact commands it must run.

Each case (see test_slurm_*.yaml): `id`, `input` (module arguments), `flags` (`check`, `diff`),
`commands` (in order: `argv` without the binary's directory, `environ` if any, `stdin` if any, `rc`, `out`,
`err`),
and `output` (keys the result must contain with these values; `failed: true` for failures,
`msg_contains` for a part of the message). A command the module runs that is not next in the list,
or one left unrun, fails the case.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest
import yaml

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args


class _Commands:
    def __init__(self, expected):
        self.expected = list(expected)
        self.ran = []

    def run_command(self, argv, check_rc=False, environ_update=None, **kwargs):
        assert isinstance(argv, list), "commands must be argument lists, got %r" % (argv,)
        short = [os.path.basename(argv[0])] + argv[1:]
        self.ran.append(short)
        assert self.expected, "unexpected command %r (no more commands expected)" % (short,)
        step = self.expected.pop(0)
        assert short == step["argv"], "command %d differs" % len(self.ran)
        assert (environ_update or {}) == step.get("environ", {}), "environment of %r" % (short,)
        assert kwargs.get("data") == step.get("stdin"), "standard input of %r: %r" % (short, kwargs.get("data"))
        return step.get("rc", 0), step.get("out", ""), step.get("err", "")


def load_cases(path):
    with open(path) as handle:
        cases = yaml.safe_load(handle)
    return [pytest.param(case, id=case["id"]) for case in cases]


def run_case(module_main, case, capsys, monkeypatch):
    commands = _Commands(case.get("commands", []))
    monkeypatch.setattr(basic.AnsibleModule, "run_command", commands.run_command)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                        lambda self, name, required=False, opt_dirs=None: "/usr/bin/%s" % name)
    # The modules poll with time.sleep: make waits instant but keep the clock moving.
    clock = {"now": 1000.0}
    monkeypatch.setattr("time.monotonic", lambda: clock["now"])
    monkeypatch.setattr("time.sleep", lambda seconds: clock.__setitem__("now", clock["now"] + seconds))
    flags = case.get("flags", {})
    args = dict(case.get("input", {}))
    args["_ansible_check_mode"] = flags.get("check", False)
    args["_ansible_diff"] = flags.get("diff", False)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            module_main()
    result = json.loads(capsys.readouterr().out)
    assert not commands.expected, "commands expected but not run: %r" % (commands.expected,)
    expected = dict(case.get("output", {}))
    msg_contains = expected.pop("msg_contains", None)
    if msg_contains:
        for part in ([msg_contains] if isinstance(msg_contains, str) else msg_contains):
            assert part in result.get("msg", ""), "msg %r lacks %r" % (result.get("msg"), part)
    expected.setdefault("failed", False)
    result.setdefault("failed", False)
    for key, value in expected.items():
        assert result.get(key) == value, "result[%r] = %r, expected %r" % (key, result.get(key), value)
    return result
