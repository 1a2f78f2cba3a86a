# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kubernetes_preload callback through a real ansible-playbook with the repository's ansible.cfg: a task's
worker starts with the Kubernetes client imported when the callback is enabled, and without it when it is not;
the output is the same either way."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
# an action run in the task's worker: which of the preloaded modules were in sys.modules when it started
PROBE = '''
import sys
from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        names = ("kubernetes.dynamic", "ansible_collections.kubernetes.core.plugins.module_utils.k8s.client")
        return {"changed": False, "msg": "preloaded: %s" % ",".join(name for name in names if name in sys.modules)}
'''
PLAYBOOK = '''
- name: Probe
  hosts: localhost
  gather_facts: false
  tasks:
    - name: What the worker has
      probe:
'''


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    directory = tmp_path_factory.mktemp("preload")
    (directory / "action_plugins").mkdir()
    (directory / "action_plugins" / "probe.py").write_text(PROBE)
    (directory / "probe.yml").write_text(PLAYBOOK)
    return directory


def run(project, config):
    env = dict(os.environ, ANSIBLE_CONFIG=str(config), ANSIBLE_NOCOLOR="1",
               ANSIBLE_ACTION_PLUGINS=str(project / "action_plugins"))
    env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
    proc = subprocess.run([str(Path(sys.executable).with_name("ansible-playbook")), "-i", "localhost,", "-c", "local",
                           "-v", str(project / "probe.yml")], cwd=str(project), env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_the_repositorys_config_preloads_the_client_in_every_worker(project):
    out = run(project, ROOT / "ansible.cfg")
    assert ("preloaded: kubernetes.dynamic,"
            "ansible_collections.kubernetes.core.plugins.module_utils.k8s.client") in out, out


def test_without_it_the_worker_imports_nothing_and_prints_the_same(project):
    config = ROOT / "ansible.cfg"
    # the repository's configuration but for the line that enables the callback
    lines = config.read_text().splitlines(True)
    enabling = [line for line in lines if line.startswith("callbacks_enabled")]
    assert enabling == ["callbacks_enabled = hpc.slurm_k8s.kubernetes_preload\n"], enabling
    other = project / "ansible.cfg"
    other.write_text("".join(line for line in lines if line not in enabling))
    with_it = run(project, config)
    without = run(project, other)
    assert '"msg": "preloaded: "' in without, without
    # the same lines, but for the probe's message and the config file line of -v
    strip = re.compile(r'"msg": "preloaded: [^"]*"|Using .* as config file')
    assert strip.sub("", with_it) == strip.sub("", without)
