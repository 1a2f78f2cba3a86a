# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/portal/files/portal_options.py: what a user may ask of their notebook job, from the form and from
the REST API, against the administrator's bounds."""

from __future__ import annotations

import importlib.util
from html.parser import HTMLParser
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[3] / "roles" / "portal" / "files" / "portal_options.py"
_spec = importlib.util.spec_from_file_location("portal_options", SOURCE)
portal_options = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(portal_options)

OPTIONS = {"partitions": ["compute", "gpu"], "cpus": {"default": 1, "max": 4},
           "memory_mb": {"default": 1024, "max": 4096}, "time_minutes": {"default": 60, "max": 480}}


@pytest.mark.parametrize("sent, expected", [
    ({}, {"partition": "compute", "nprocs": "1", "memory": "1024M", "runtime": "01:00:00"}),
    # the form: a list of strings per field
    ({"partition": ["gpu"], "cpus": ["4"], "memory_mb": ["4096"], "time_minutes": ["90"]},
     {"partition": "gpu", "nprocs": "4", "memory": "4096M", "runtime": "01:30:00"}),
    # the REST API: scalars
    ({"partition": "compute", "cpus": 2, "memory_mb": 512, "time_minutes": 480},
     {"partition": "compute", "nprocs": "2", "memory": "512M", "runtime": "08:00:00"}),
    ({"time_minutes": [" 5 "]}, {"partition": "compute", "nprocs": "1", "memory": "1024M", "runtime": "00:05:00"}),
])
def test_allowed_options_become_the_jobs_request(sent, expected):
    assert portal_options.job_options(OPTIONS, sent) == expected
    # what the spawner keeps (user_options) reads back unchanged, and gives the same request
    checked = portal_options.chosen(OPTIONS, sent)
    assert portal_options.chosen(OPTIONS, checked) == checked
    assert portal_options.job_options(OPTIONS, checked) == expected


@pytest.mark.parametrize("sent, message", [
    ({"cpus": ["5"]}, "cpus: 5 CPUs is outside 1 to 4, the portal's bound"),
    ({"cpus": ["0"]}, "cpus: 0 CPUs is outside 1 to 4, the portal's bound"),
    ({"memory_mb": 4097}, "memory_mb: 4097 MB is outside 1 to 4096, the portal's bound"),
    ({"time_minutes": ["481"]}, "time_minutes: 481 minutes is outside 1 to 480, the portal's bound"),
    ({"cpus": ["-1"]}, "cpus: a whole number of CPUs expected, got '-1'"),
    ({"cpus": ["1.5"]}, "cpus: a whole number of CPUs expected, got '1.5'"),
    ({"cpus": True}, "cpus: a number or a name expected, got True"),
    ({"cpus": ["1", "2"]}, "cpus: one value expected, got 2"),
    ({"partition": ["debug"]}, "partition: 'debug' is not offered (compute, gpu)"),
    # a value that would add a line to the batch script is only an unknown partition
    ({"partition": "compute\n#SBATCH --mem=0"}, "partition: 'compute\\n#SBATCH --mem=0' is not offered"),
    ({"nprocs": "64"}, "unknown option(s) nprocs; the portal offers partition, cpus, memory_mb, time_minutes"),
])
def test_options_outside_the_bounds_are_refused_naming_the_field(sent, message):
    with pytest.raises(portal_options.JobOptionError) as error:
        portal_options.job_options(OPTIONS, sent)
    assert str(error.value).startswith(message), str(error.value)


class _Fields(HTMLParser):
    def __init__(self):
        super().__init__()
        self.fields = {}

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in ("input", "select"):
            self.fields[attrs["name"]] = attrs
        if tag == "option":
            self.fields.setdefault("options", []).append((attrs["value"], "selected" in attrs))


def test_the_form_offers_each_field_with_its_bound_and_default():
    parser = _Fields()
    parser.feed(portal_options.form_html(dict(OPTIONS, partitions=["compute", "<gpu>"])))
    assert set(parser.fields) == {"partition", "cpus", "memory_mb", "time_minutes", "options"}
    assert parser.fields["options"] == [("compute", True), ("<gpu>", False)]   # escaped in the HTML, read back
    assert {name: (f["min"], f["max"], f["value"]) for name, f in parser.fields.items()
            if name not in ("partition", "options")} == {
        "cpus": ("1", "4", "1"), "memory_mb": ("1", "4096", "1024"), "time_minutes": ("1", "480", "60")}
