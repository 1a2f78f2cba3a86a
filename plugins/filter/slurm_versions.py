# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which Slurm versions this collection deploys, and whether Slurm supports going from one version to
another in place (SchedMD's upgrade guide).

A major release is the year and month of its first release (24.11). Its daemons read the state files,
the accounting database and the RPCs of the previous two major releases, and from 24.11 on of the
previous three (the 6-month cycle began with 24.05). Nothing reads a newer major's state: a downgrade
is never supported. The slurmctld role refuses an image change outside that window before anything
changes (tasks/version.yml); this filter only decides, from what `slurmctld -V` printed.

The collection's configuration (slurm.conf, slurmdbd.conf, the entrypoint, sackd on login) is checked
against the daemons of the majors in SUPPORTED_MAJORS; the role refuses other majors on a first
deployment as on a change (slurm_version_supported), a newer one only unless the admin accepts it.

Each component may have its own image (slurmd_image, login_image, each burst group's, ...). Slurm runs a mix
of versions only in one order: slurmdbd no older than slurmctld, slurmctld no older than slurmd (the
always-on workers and the burst groups), slurmrestd and the commands (on login), each within the window of
the newer one (slurm_images_supported).
"""

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError

# the majors of the 9-month cycle; from 24.05 on there is one each May and November
_MAJORS_BEFORE_24_05 = ("14.03", "14.11", "15.08", "16.05", "17.02", "17.11", "18.08", "19.05", "20.02",
                        "20.11", "21.08", "22.05", "23.02", "23.11")
_MAJORS = _MAJORS_BEFORE_24_05 + tuple("%02d.%s" % (year, month) for year in range(24, 100) for month in ("05", "11"))
# The majors whose daemons ran this collection's configuration (the images build each with SLURM_MAJOR), the
# oldest and the newest: the options the configuration uses are accepted by both, so by every major between
# them too (Slurm does not remove an option and bring it back). Older majors are refused: nothing has run
# them here. Newer ones are refused unless the admin accepts them (slurmctld_allow_newer_major), for a new
# Slurm release that this collection does not know yet.
TESTED_MAJORS = ("24.11", "26.05")
SUPPORTED_MAJORS = _MAJORS[_MAJORS.index(TESTED_MAJORS[0]):_MAJORS.index(TESTED_MAJORS[-1]) + 1]
# `slurmctld -V` prints "slurm 24.11.5" or, in Debian's build, "slurm-wlm 26.05.5"
_VERSION = re.compile(r"(?:^|\s)([0-9]{2}\.[0-9]{2})\.([0-9]+)(?:[-.+~][0-9A-Za-z.+~-]*)?\s*$")


# who may be older than whom in one cluster (SchedMD's upgrade guide: slurmdbd first, then slurmctld, then
# slurmd and the commands): (newer or equal, older or equal)
_NO_NEWER_THAN = (("slurmdbd", "slurmctld"), ("slurmctld", "slurmd"), ("slurmctld", "slurmrestd"), ("slurmctld", "login"))


def _window(major):
    """How many major releases back a daemon of this major talks to and reads the state of."""
    return 3 if _MAJORS.index(major) >= _MAJORS.index("24.11") else 2


def _parse(text, what):
    match = _VERSION.search(str(text or "").strip())
    if not match:
        raise AnsibleFilterError("cannot read a Slurm version from the %s (expected e.g. 'slurm 24.11.5'), got %r"
                                 % (what, str(text or "")[:200]))
    major = match.group(1)
    if major not in _MAJORS:
        raise AnsibleFilterError("the %s reports Slurm %s.%s, but %s is not a Slurm major release"
                                 % (what, major, match.group(2), major))
    return major, "%s.%s" % (major, match.group(2))


def slurm_version_change(running, target):
    """From `slurmctld -V` of the running image and of the target image: a dict with both versions
    (`running`, `target`), their majors, `majors_apart` (negative for a downgrade), whether Slurm
    supports the change in place (`supported`) and a sentence that says why (`reason`)."""
    running_major, running_version = _parse(running, "running slurmctld image")
    target_major, target_version = _parse(target, "target slurmctld image")
    apart = _MAJORS.index(target_major) - _MAJORS.index(running_major)
    window = _window(target_major)
    change = {"running": running_version, "target": target_version, "running_major": running_major,
              "target_major": target_major, "majors_apart": apart, "window": window}
    if apart < 0:
        reason = ("Slurm %s to %s is a downgrade: Slurm %s cannot read the state files and accounting database"
                  " that Slurm %s has written (SchedMD supports no downgrade)"
                  % (running_version, target_version, target_major, running_major))
    elif apart > window:
        reason = ("Slurm %s to %s skips %d major releases: Slurm %s upgrades in place from the previous %d majors"
                  " only (SchedMD's upgrade guide); upgrade through an intermediate major first"
                  % (running_version, target_version, apart - 1, target_major, window))
    elif apart == 0:
        reason = "Slurm %s to %s stays within major %s" % (running_version, target_version, target_major)
    else:
        reason = ("Slurm %s to %s is %d major release(s) up, within the %d that Slurm %s upgrades from: slurmdbd"
                  " converts the accounting database and slurmctld its state files at their first start"
                  % (running_version, target_version, apart, window, target_major))
    return dict(change, supported=0 <= apart <= window, reason=reason)


def slurm_version_supported(output, allow_newer=False, what="slurmctld image"):
    """From `slurmctld -V` of an image: a dict with its `version` and `major`, whether this collection
    deploys that major (`supported`: one of SUPPORTED_MAJORS, or a newer one when `allow_newer`), whether it
    is `newer` than the newest supported, the `supported_majors` and a sentence that says why (`reason`)."""
    major, version = _parse(output, what)
    first, last = SUPPORTED_MAJORS[0], SUPPORTED_MAJORS[-1]
    newer = _MAJORS.index(major) > _MAJORS.index(last)
    supported_text = "Slurm %s to %s, tested on %s" % (first, last, " and ".join(TESTED_MAJORS))
    if major in SUPPORTED_MAJORS:
        reason = "Slurm %s: this collection supports %s" % (version, supported_text)
    elif newer and allow_newer:
        reason = ("Slurm %s is newer than this collection supports (%s); deployed anyway because"
                  " slurmctld_allow_newer_major is true: options Slurm %s removed or renamed make its daemons"
                  " fail at start, with the reason in their log" % (version, supported_text, major))
    elif newer:
        reason = ("Slurm %s is newer than this collection supports (%s): its configuration has not been checked"
                  " against Slurm %s's daemons. Use an image of a supported major, or set"
                  " slurmctld_allow_newer_major: true to deploy it anyway" % (version, supported_text, major))
    else:
        reason = ("Slurm %s is older than this collection supports (%s): its configuration has not been checked"
                  " against Slurm %s's daemons. Use an image of a supported major" % (version, supported_text, major))
    return {"version": version, "major": major, "newer": newer, "supported_majors": list(SUPPORTED_MAJORS),
            "supported": major in SUPPORTED_MAJORS or (newer and bool(allow_newer)), "reason": reason}


def slurm_images_supported(images, outputs, allow_newer=False):
    """From the Slurm images of a cluster (cluster_model.slurm_images: a list of `component` and `image`, and
    optionally the `variable` that sets the image, default `<component>_image`, and the component it runs
    as, `runs_as`: a burst group's pods run slurmd) and what each image's `-V` printed (`outputs`, by image):
    whether this collection deploys every one (slurm_version_supported) and Slurm runs them together
    (_NO_NEWER_THAN, within the newer one's window). A dict with the `versions` by component, `supported` and a
    sentence that names the variables, their images and versions (`reason`): the first refusal, else what
    each image runs."""
    groups = {}
    variable = {}
    for entry in images:
        groups.setdefault(entry["image"], []).append(entry["component"])
        variable[entry["component"]] = entry.get("variable") or "%s_image" % entry["component"]
    versions, majors, said = {}, {}, []
    for image, components in groups.items():
        names = ", ".join(variable[component] for component in components)
        if image not in outputs:
            raise AnsibleFilterError("no version was read from %s (%s)" % (names, image))
        verdict = slurm_version_supported(outputs[image], allow_newer, "%s (%s)" % (names, image))
        if not verdict["supported"]:
            return {"versions": versions, "supported": False, "reason": "%s (%s): %s" % (names, image, verdict["reason"])}
        said.append("%s (%s): %s" % (names, image, verdict["reason"]))
        for component in components:
            versions[component] = verdict["version"]
            majors[component] = verdict["major"]
    image_of = {entry["component"]: entry["image"] for entry in images}
    runs_as = {entry["component"]: entry.get("runs_as") or entry["component"] for entry in images}
    for newer_kind, older_kind in _NO_NEWER_THAN:
        for newer, older in ((newer, older) for newer in versions for older in versions
                             if runs_as[newer] == newer_kind and runs_as[older] == older_kind):
            apart = _MAJORS.index(majors[newer]) - _MAJORS.index(majors[older])
            both = "%s (%s) runs Slurm %s and %s (%s) Slurm %s" % (
                variable[older], image_of[older], versions[older], variable[newer], image_of[newer], versions[newer])
            if apart < 0:
                reason = ("%s: %s must not be newer than %s (Slurm runs slurmdbd no older than slurmctld, and"
                          " slurmctld no older than slurmd, slurmrestd and the commands); use images of one version,"
                          " or upgrade %s first" % (both, older, newer, newer))
            elif apart > _window(majors[newer]):
                reason = ("%s: %s talks to the previous %d major releases only (SchedMD's upgrade guide); use images"
                          " of one version" % (both, newer, _window(majors[newer])))
            else:
                continue
            return {"versions": versions, "supported": False, "reason": reason}
    return {"versions": versions, "supported": True, "reason": "; ".join(said)}


def slurm_images_running(images, running):
    """The images the components of `images` (cluster_model.slurm_images and the burst groups') run now and
    will not run after the change: from `running` (component -> image of its StatefulSet, Deployment or pod
    template), each component whose running image differs from its target one, as an entry like those of
    `images` (`component` was-<component>, the component's `version_command` and `runs_as`, and `variable`
    naming the pods). slurmctld is left out: the version check reads its running image anyway when it
    changes (`running`)."""
    entries = []
    for entry in images:
        now = running.get(entry["component"])
        if entry["component"] == "slurmctld" or not now or now == entry["image"]:
            continue
        entries.append({"component": "was-%s" % entry["component"], "image": now,
                        "version_command": entry["version_command"],
                        "runs_as": entry.get("runs_as") or entry["component"],
                        "variable": "the %s pods running now" % entry["component"]})
    return entries


def slurm_images_at_least(images, outputs, major):
    """Whether every image of `images` (entries as for slurm_images_supported) runs Slurm `major` or newer,
    from what each image's `-V` printed (`outputs`, by image): a dict with `supported` and `older`, one
    sentence per image that does not ('slurmd_image (IMAGE) runs Slurm 24.11.5'), the variables of one image
    together. A feature whose slurm.conf key an older Slurm does not know needs this of every image that
    reads slurm.conf: an older parser stops at an unknown key (24.11's commands and daemons: "Parsing error at
    unrecognized key")."""
    if major not in _MAJORS:
        raise AnsibleFilterError("%r is not a Slurm major release" % (major,))
    groups = {}
    for entry in images:
        groups.setdefault(entry["image"], []).append(entry.get("variable") or "%s_image" % entry["component"])
    older = []
    for image, names in groups.items():
        if image not in outputs:
            raise AnsibleFilterError("no version was read from %s (%s)" % (", ".join(names), image))
        image_major, version = _parse(outputs[image], "%s (%s)" % (", ".join(names), image))
        if _MAJORS.index(image_major) < _MAJORS.index(major):
            older.append("%s (%s) runs Slurm %s" % (", ".join(names), image, version))
    return {"supported": not older, "older": older}


class FilterModule(object):
    def filters(self):
        return {"slurm_version_change": slurm_version_change, "slurm_version_supported": slurm_version_supported,
                "slurm_images_supported": slurm_images_supported, "slurm_images_running": slurm_images_running,
                "slurm_images_at_least": slurm_images_at_least}
