# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which Slurm versions the collection deploys, and which version changes are supported in place (SchedMD's
upgrade guide), from `slurmctld -V`."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from pathlib import Path

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.hpc.slurm_k8s.plugins.filter.slurm_versions import (
    SUPPORTED_MAJORS, TESTED_MAJORS, slurm_images_at_least, slurm_images_running, slurm_images_supported,
    slurm_version_change, slurm_version_supported)


@pytest.mark.parametrize("running, target, apart, supported", [
    # the output of the real daemons: Debian's 24.11 (trixie) and 26.05 (forky), upstream's 22.05
    ("slurm-wlm 24.11.5", "slurm-wlm 26.05.5", 3, True),      # 24.11 -> 25.05 -> 25.11 -> 26.05
    ("slurm-wlm 24.11.5", "slurm-wlm 24.11.7", 0, True),
    ("slurm 22.05.8", "slurm 23.11.10", 2, True),              # before 24.11: two majors back
    ("slurm 22.05.8", "slurm 24.05.1", 3, False),
    ("slurm 24.05.1", "slurm-wlm 26.05.5", 4, False),          # 26.05 reads 24.11, 25.05, 25.11 only
    ("slurm 23.11.1", "slurm 24.11.0", 2, True),
    ("slurm-wlm 26.05.5", "slurm-wlm 24.11.5", -3, False),     # a downgrade
    ("slurm-wlm 24.11.5", "slurm-wlm 24.11.4", 0, True),       # a maintenance release back: same state format
])
def test_the_window_of_the_target_major(running, target, apart, supported):
    change = slurm_version_change(running, target)
    assert (change["majors_apart"], change["supported"]) == (apart, supported)
    assert change["running"] in change["reason"] and change["target"] in change["reason"]


def test_the_reasons_name_the_versions_and_the_rule():
    assert "is a downgrade" in slurm_version_change("slurm-wlm 26.05.5", "slurm-wlm 24.11.5")["reason"]
    skip = slurm_version_change("slurm 24.05.1", "slurm-wlm 26.05.5")
    assert (skip["running_major"], skip["target_major"], skip["window"]) == ("24.05", "26.05", 3)
    assert "skips 3 major releases" in skip["reason"] and "previous 3 majors" in skip["reason"]
    assert "converts the accounting database" in slurm_version_change("slurm 24.11.5", "slurm 25.05.0")["reason"]


@pytest.mark.parametrize("text, message", [
    ("", "cannot read a Slurm version from the running"),
    ("exec format error", "cannot read a Slurm version from the running"),
    ("slurm 24.12.1", "24.12 is not a Slurm major release"),
])
def test_output_that_is_not_a_version_fails_closed(text, message):
    with pytest.raises(AnsibleFilterError, match=message):
        slurm_version_change(text, "slurm 24.11.5")


def test_the_tested_majors_are_those_the_images_build_and_the_supported_run_between_them():
    # images/slurm/slurm-majors lists what the images build (and T3 runs): the version check must not
    # claim another list
    listed = (Path(__file__).parents[4] / "images" / "slurm" / "slurm-majors").read_text().splitlines()
    assert sorted(line.split()[0] for line in listed if line.strip() and not line.startswith("#")) == list(TESTED_MAJORS)
    assert SUPPORTED_MAJORS == ("24.11", "25.05", "25.11", "26.05")


@pytest.mark.parametrize("output, allow_newer, supported, newer", [
    # the images' own output: Debian's 24.11 (trixie) and 26.05 (forky)
    ("slurm-wlm 24.11.5", False, True, False),
    ("slurm-wlm 26.05.5", False, True, False),
    ("slurm 25.05.3", False, True, False),              # between the two tested majors
    ("slurm 24.05.8", False, False, False),             # older: no sackd on login's configuration, ...
    ("slurm 22.05.8", True, False, False),              # allow_newer never lets an older major in
    ("slurm 26.11.0", False, False, True),              # newer than the newest tested
    ("slurm 27.05.1", True, True, True),                # ... accepted when the admin says so
])
def test_a_major_is_supported_between_the_oldest_and_newest_tested(output, allow_newer, supported, newer):
    verdict = slurm_version_supported(output, allow_newer)
    assert (verdict["supported"], verdict["newer"]) == (supported, newer)
    assert verdict["version"] in verdict["reason"]
    assert "Slurm 24.11 to 26.05, tested on 24.11 and 26.05" in verdict["reason"]
    assert verdict["supported_majors"] == ["24.11", "25.05", "25.11", "26.05"]


def test_the_reasons_say_what_to_do():
    assert "this collection supports" in slurm_version_supported("slurm-wlm 24.11.5")["reason"]
    older = slurm_version_supported("slurm 23.11.10")["reason"]
    assert older.startswith("Slurm 23.11.10 is older than this collection supports") and "slurmctld_allow_newer_major" not in older
    newer = slurm_version_supported("slurm 26.11.0")["reason"]
    assert "set slurmctld_allow_newer_major: true to deploy it anyway" in newer
    assert "deployed anyway because slurmctld_allow_newer_major is true" in slurm_version_supported("slurm 26.11.0", True)["reason"]


@pytest.mark.parametrize("text", ["", "exec format error", "slurm 24.12.1"])
def test_an_unreadable_version_is_not_supported_but_an_error(text):
    with pytest.raises(AnsibleFilterError, match="slurmctld image"):
        slurm_version_supported(text, True)


DAEMON = "hpc-slurm-k8s/slurm-daemon:1"
NODE = "hpc-slurm-k8s/slurm:1"
OTHER = "site/slurm:2"


def _images(slurmd=NODE, login=NODE, slurmdbd=DAEMON, slurmrestd=None):
    """cluster_model.slurm_images in its order (slurmrestd only when enabled)."""
    images = [{"component": "slurmctld", "image": DAEMON}, {"component": "slurmdbd", "image": slurmdbd}]
    images += [{"component": "slurmrestd", "image": slurmrestd}] if slurmrestd else []
    return images + [{"component": "slurmd", "image": slurmd}, {"component": "login", "image": login}]


@pytest.mark.parametrize("images, outputs, supported, said", [
    # the defaults: the daemon image and the node image of one build
    (_images(), {DAEMON: "slurm-wlm 24.11.5", NODE: "slurm-wlm 24.11.5"}, True,
     "slurmctld_image, slurmdbd_image (%s): Slurm 24.11.5: this collection supports Slurm 24.11 to 26.05" % DAEMON),
    # slurmd and the commands older than slurmctld, within its window (an upgrade in SchedMD's order)
    (_images(slurmd=OTHER, login=OTHER), {DAEMON: "slurm-wlm 26.05.5", NODE: "x", OTHER: "slurm-wlm 24.11.5"}, True,
     "slurmd_image, login_image (%s): Slurm 24.11.5" % OTHER),
    # slurmd newer than slurmctld
    (_images(slurmd=OTHER), {DAEMON: "slurm-wlm 24.11.5", NODE: "slurm-wlm 24.11.5", OTHER: "slurm-wlm 26.05.5"}, False,
     "slurmd_image (%s) runs Slurm 26.05.5 and slurmctld_image (%s) Slurm 24.11.5: slurmd must not be newer than"
     " slurmctld" % (OTHER, DAEMON)),
    # the commands on login newer than slurmctld
    (_images(login=OTHER), {DAEMON: "slurm-wlm 24.11.5", NODE: "slurm-wlm 24.11.5", OTHER: "slurm 25.05.1"}, False,
     "login_image (%s) runs Slurm 25.05.1 and slurmctld_image" % OTHER),
    # slurmdbd older than slurmctld
    (_images(slurmdbd=OTHER), {DAEMON: "slurm-wlm 26.05.5", NODE: "slurm-wlm 26.05.5", OTHER: "slurm-wlm 24.11.5"}, False,
     "slurmctld must not be newer than slurmdbd (Slurm runs slurmdbd no older than slurmctld, and slurmctld no older"
     " than slurmd, slurmrestd and the commands); use images of one version, or upgrade slurmdbd first"),
    # slurmrestd newer than slurmctld
    (_images(slurmrestd=OTHER), {DAEMON: "slurm-wlm 24.11.5", NODE: "slurm-wlm 24.11.5", OTHER: "slurm 25.11.2"}, False,
     "slurmrestd_image (%s) runs Slurm 25.11.2" % OTHER),
    # slurmd four majors behind a newer-than-supported slurmctld the admin accepted: past its window
    (_images(), {DAEMON: "slurm 26.11.0", NODE: "slurm-wlm 24.11.5"}, False,
     "slurmctld talks to the previous 3 major releases only"),
    # an unsupported major anywhere is refused first, naming the variables that use that image
    (_images(slurmd=OTHER, login=OTHER), {DAEMON: "slurm-wlm 24.11.5", NODE: "x", OTHER: "slurm 23.11.10"}, False,
     "slurmd_image, login_image (%s): Slurm 23.11.10 is older than this collection supports" % OTHER),
])
def test_the_images_of_a_cluster_run_together(images, outputs, supported, said):
    verdict = slurm_images_supported(images, outputs, allow_newer=True)
    assert verdict["supported"] is supported, verdict["reason"]
    assert said in verdict["reason"]


def _burst(name, image, variable="powersave_image"):
    """An entry of the powersave role's powersave_slurm_images (a burst group's pods run slurmd)."""
    return {"component": "burst-" + name, "image": image, "variable": variable, "runs_as": "slurmd"}


@pytest.mark.parametrize("burst, outputs, supported, said", [
    # the default: the node image, named once with the variables that use it
    (_burst("gpu", NODE), {DAEMON: "slurm-wlm 24.11.5", NODE: "slurm-wlm 24.11.5"}, True,
     "slurmd_image, login_image, powersave_image (%s): Slurm 24.11.5" % NODE),
    # a group's own image, older than slurmctld within its window
    (_burst("gpu", OTHER, "powersave_groups[gpu].image"),
     {DAEMON: "slurm-wlm 26.05.5", NODE: "slurm-wlm 26.05.5", OTHER: "slurm-wlm 24.11.5"}, True,
     "powersave_groups[gpu].image (%s): Slurm 24.11.5" % OTHER),
    # newer than slurmctld, like slurmd: named by the group's variable
    (_burst("gpu", OTHER, "powersave_groups[gpu].image"),
     {DAEMON: "slurm-wlm 24.11.5", NODE: "slurm-wlm 24.11.5", OTHER: "slurm-wlm 26.05.5"}, False,
     "powersave_groups[gpu].image (%s) runs Slurm 26.05.5 and slurmctld_image (%s) Slurm 24.11.5: burst-gpu must not"
     " be newer than slurmctld" % (OTHER, DAEMON)),
    # past the window of a newer slurmctld the admin accepted
    (_burst("big", OTHER), {DAEMON: "slurm 26.11.0", NODE: "slurm 26.11.0", OTHER: "slurm-wlm 24.11.5"}, False,
     "powersave_image (%s) runs Slurm 24.11.5 and slurmctld_image (%s) Slurm 26.11.0: slurmctld talks to the previous"
     " 3 major releases only" % (OTHER, DAEMON)),
])
def test_burst_groups_run_as_slurmd(burst, outputs, supported, said):
    verdict = slurm_images_supported(_images() + [burst], outputs, allow_newer=True)
    assert verdict["supported"] is supported, verdict["reason"]
    assert said in verdict["reason"]


def test_each_component_gets_the_version_of_its_image():
    verdict = slurm_images_supported(_images(slurmd=OTHER), {DAEMON: "slurm-wlm 26.05.5", NODE: "slurm-wlm 26.05.5",
                                                             OTHER: "slurm 25.05.3"})
    assert verdict["versions"] == {"slurmctld": "26.05.5", "slurmdbd": "26.05.5", "slurmd": "25.05.3", "login": "26.05.5"}
    assert verdict["supported"]
    # a newer major unless the admin accepts it
    refused = slurm_images_supported(_images(), {DAEMON: "slurm 26.11.0", NODE: "slurm 26.11.0"})
    assert not refused["supported"] and "set slurmctld_allow_newer_major: true" in refused["reason"]


def test_an_image_whose_version_was_not_read_is_an_error():
    with pytest.raises(AnsibleFilterError, match="no version was read from slurmd_image, login_image"):
        slurm_images_supported(_images(), {DAEMON: "slurm-wlm 24.11.5"})
    with pytest.raises(AnsibleFilterError, match=r"slurmd_image, login_image \(%s\)" % NODE):
        slurm_images_supported(_images(), {DAEMON: "slurm-wlm 24.11.5", NODE: "exec format error"})


# --- features of a newer Slurm (cluster_metrics_enabled: 25.11 and newer) --------------------------------------
CTLD_V = ["/usr/sbin/slurmctld", "-V"]
SLURMD_V = ["/usr/sbin/slurmd", "-V"]
TARGETS = [{"component": "slurmctld", "image": "daemon:26", "version_command": CTLD_V},
           {"component": "slurmdbd", "image": "daemon:26", "version_command": CTLD_V},
           {"component": "slurmd", "image": "node:26", "version_command": SLURMD_V},
           {"component": "login", "image": "node:26", "version_command": SLURMD_V},
           {"component": "burst-gpu", "image": "gpu:26", "version_command": SLURMD_V, "runs_as": "slurmd",
            "variable": "powersave_groups[gpu].image"}]


def test_the_images_pods_run_now_are_those_that_change():
    running = {"slurmctld": "daemon:24", "slurmdbd": "daemon:26", "slurmd": "node:24", "login": "node:24",
               "mariadb": "mariadb:11"}
    assert slurm_images_running(TARGETS, running) == [
        {"component": "was-slurmd", "image": "node:24", "version_command": SLURMD_V, "runs_as": "slurmd",
         "variable": "the slurmd pods running now"},
        {"component": "was-login", "image": "node:24", "version_command": SLURMD_V, "runs_as": "login",
         "variable": "the login pods running now"}]
    # a first deployment runs nothing; a component that keeps its image is not read twice
    assert slurm_images_running(TARGETS, {}) == []
    assert slurm_images_running(TARGETS, {"slurmd": "node:26", "burst-gpu": "gpu:26"}) == []


@pytest.mark.parametrize("outputs, older", [
    # the real daemons' output: Debian's 26.05 and 24.11
    ({"daemon:26": "slurm-wlm 26.05.5", "node:26": "slurm-wlm 26.05.5", "gpu:26": "slurm-wlm 26.05.5"}, []),
    ({"daemon:26": "slurm 25.11.0", "node:26": "slurm 25.11.2", "gpu:26": "slurm 25.11.2"}, []),
    ({"daemon:26": "slurm-wlm 26.05.5", "node:26": "slurm-wlm 24.11.5", "gpu:26": "slurm-wlm 26.05.5"},
     ["slurmd_image, login_image (node:26) runs Slurm 24.11.5"]),
    ({"daemon:26": "slurm 25.05.3", "node:26": "slurm-wlm 24.11.5", "gpu:26": "slurm-wlm 24.11.5"},
     ["slurmctld_image, slurmdbd_image (daemon:26) runs Slurm 25.05.3", "slurmd_image, login_image (node:26) runs"
      " Slurm 24.11.5", "powersave_groups[gpu].image (gpu:26) runs Slurm 24.11.5"]),
])
def test_every_image_must_run_the_major_a_feature_needs(outputs, older):
    assert slurm_images_at_least(TARGETS, outputs, "25.11") == {"supported": not older, "older": older}


def test_the_pods_running_now_are_named_as_such():
    was = [{"component": "was-slurmd", "image": "node:24", "variable": "the slurmd pods running now"}]
    verdict = slurm_images_at_least(TARGETS + was, {"daemon:26": "slurm-wlm 26.05.5", "node:26": "slurm-wlm 26.05.5",
                                                    "gpu:26": "slurm-wlm 26.05.5", "node:24": "slurm-wlm 24.11.5"},
                                    "25.11")
    assert verdict == {"supported": False, "older": ["the slurmd pods running now (node:24) runs Slurm 24.11.5"]}


@pytest.mark.parametrize("outputs, major, message", [
    ({"daemon:26": "slurm-wlm 26.05.5"}, "25.11", "no version was read from slurmd_image, login_image (node:26)"),
    ({"daemon:26": "slurm-wlm 26.05.5", "node:26": "sh: slurmd: not found", "gpu:26": "slurm 26.05.5"}, "25.11",
     "cannot read a Slurm version from the slurmd_image, login_image (node:26)"),
    ({}, "25.06", "'25.06' is not a Slurm major release"),
])
def test_an_unread_version_or_an_unknown_major_is_an_error(outputs, major, message):
    with pytest.raises(AnsibleFilterError, match=re.escape(message)):
        slurm_images_at_least(TARGETS, outputs, major)
