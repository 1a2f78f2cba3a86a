# -*- coding: utf-8 -*-
# Copyright: (c) 2026, hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one validation layer for the variables of every role (controller side).

Every variable of every role's argument spec has a rule here (tests/unit/plugins/test_inputs.py
checks that none is missing). A rule knows the grammar of the place the value ends up in: a line of
slurm.conf, a Kubernetes name, a users-file field, an authorized_keys line... ``check(values)`` returns
one ``Problem`` per failed rule, naming the variable (with the path inside it) and the rule; it never
repeats the value of a secret.
"""

from __future__ import annotations

import base64
import binascii
import difflib
import re
import struct
from dataclasses import dataclass

from ansible_collections.hpc.slurm_k8s.plugins.module_utils._slurm_accounting import (
    FreshState,
    collection_input,
    plan as accounting_plan,
)
from ansible_collections.hpc.slurm_k8s.plugins.filter.slurm_versions import SUPPORTED_MAJORS
from ansible_collections.hpc.slurm_k8s.plugins.module_utils._slurm_runner import SlurmInputError
from ansible_collections.hpc.slurm_k8s.plugins.plugin_utils import _slurm_parameters

# --- problems -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """One failed rule: where (variable and path inside it) and what was expected."""

    where: str
    rule: str

    def __str__(self):
        return "%s: %s" % (self.where, self.rule)


class _Fail(Exception):
    """Raised by a rule: the text says which rule failed."""


def _shown(value, secret=False):
    if secret:
        return "a value of %d characters" % len(str(value))
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# --- character classes --------------------------------------------------------------------------

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_NAMED_CONTROL = {"\n": "a line break \\n", "\r": "a carriage return \\r", "\x00": "a NUL byte", "\t": "a tab"}


def _no_control(value, what):
    found = _CONTROL.search(value)
    if found:
        char = found.group(0)
        raise _Fail("must not contain %s (U+%04X): it would end the line of %s it is written to"
                    % (_NAMED_CONTROL.get(char, "a control character"), ord(char), what))


def _ascii(value, what):
    for char in value:
        if ord(char) > 0x7e:
            raise _Fail("must be ASCII (found U+%04X); %s is read as bytes" % (ord(char), what))


def _string(value):
    if isinstance(value, bool) or not isinstance(value, str):
        raise _Fail("must be a string, got %s" % type(value).__name__)
    return value


def _length(value, low, high):
    if not low <= len(value) <= high:
        if low == high:
            raise _Fail("must be %d characters long (got %d)" % (low, len(value)))
        raise _Fail("must be %d to %d characters long (got %d)" % (low, high, len(value)))


# --- rules: each takes the value and raises _Fail; they are composed in RULES below ---------------


def _pattern(regex, description, max_length=None, flags=0):
    compiled = re.compile(regex, flags)

    def rule(value):
        value = _string(value)
        _no_control(value, "the file or manifest")
        if max_length is not None and len(value) > max_length:
            raise _Fail("must be at most %d characters (got %d)" % (max_length, len(value)))
        if not compiled.fullmatch(value):
            raise _Fail("must be %s, got %s" % (description, _shown(value)))
    return rule


def _int_range(low, high, unit=""):
    def rule(value):
        if isinstance(value, bool) or not isinstance(value, int):
            raise _Fail("must be an integer, got %s" % type(value).__name__)
        if not low <= value <= high:
            raise _Fail("must be within %d-%d%s (got %d)" % (low, high, unit, value))
    return rule


def _one_of(*allowed_rules, description):
    def rule(value):
        for allowed in allowed_rules:
            try:
                allowed(value)
                return
            except _Fail:
                continue
        raise _Fail("must be %s, got %s" % (description, _shown(value)))
    return rule


def _empty_or(rule, description):
    """The empty string (the variable's "not set"), or a value that passes ``rule``."""
    return _one_of(_pattern(r"", ""), rule, description=description)


def _any(value):
    """Booleans and values whose choices the argument spec restricts."""


def _null(value):
    if value is not None:
        raise _Fail("must be null")


DNS1123_LABEL = _pattern(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", "a DNS-1123 label (lower-case letters, digits, '-')", 63)
DNS1123_SUBDOMAIN = _pattern(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
                             "a DNS-1123 subdomain (lower-case letters, digits, '-', '.')", 253)
CLUSTER_NAME = _pattern(r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?",
                        "a DNS-1123 label of at most 40 characters starting with a letter")
OPTIONAL_SUBDOMAIN = _empty_or(DNS1123_SUBDOMAIN, "empty or a DNS-1123 subdomain (a StorageClass or Secret name)")
_LABEL_NAME = r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)"
LABEL_KEY = _pattern(r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?" + _LABEL_NAME,
                     "a Kubernetes label key ([prefix/]name: name at most 63 alphanumerics, '-', '_', '.')", 316)
LABEL_VALUE = _pattern(_LABEL_NAME + "?", "a Kubernetes label value (at most 63 alphanumerics, '-', '_', '.')")
_QUANTITY = _pattern(r"[+]?([0-9]+([.][0-9]*)?|[.][0-9]+)([eE][+-]?[0-9]+|[numkMGTPE]|[KMGTPE]i)?",
                     "a Kubernetes quantity such as 500m, 2 or 1Gi", 64)


def _quantity(value):
    """A quantity; YAML numbers (cpu: 2, nvidia.com/gpu: 1) are quantities too."""
    _QUANTITY(str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value)


QUANTITY = _quantity
SIZE = _pattern(r"[0-9]+(\.[0-9]+)?([KMGTPE]i?)?", "a storage size such as 10Gi", 64)
CPU_REQUEST = _pattern(r"([0-9]+m|[0-9]+([.][0-9]{1,3})?)?", 'empty or a CPU quantity such as "500m" or "0.5"', 16)
RESOURCE_NAME = _pattern(r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?",
                         "a Kubernetes resource name such as cpu, memory or nvidia.com/gpu", 253)
# registry[:port]/path, lower case (the tag is separate: cluster_image_tag)
_REPOSITORY = r"([A-Za-z0-9.-]+(:[0-9]+)?/)?[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
IMAGE_REPOSITORY = _pattern(_REPOSITORY, "an image repository without a tag (e.g. registry.example.org/hpc/slurm); "
                            "the tag is cluster_image_tag", 255)
IMAGE_TAG = _pattern(_TAG, "an image tag (letters, digits, '_', '.', '-'; at most 128)")
IMAGE = _pattern(_REPOSITORY + "(:" + _TAG + ")?(@sha256:[a-f0-9]{64})?",
                 "an image reference such as docker.io/library/mariadb:11.8", 512)
OPTIONAL_IMAGE = _empty_or(IMAGE, "empty or an image reference")
CONTAINER_PATH = _pattern(r"(/[A-Za-z0-9._+@-]+)+/?", "an absolute path of plain characters (letters, digits, '._+@-')", 1024)
CONTROLLER_PATH = _pattern(r"[^\x00-\x1f\x7f]*", "a path without control characters", 4096)
ABSOLUTE_OR_EMPTY_PATH = _pattern(r"(/[^\x00-\x1f\x7f]*)?", "empty (Kubernetes API) or an absolute path", 4096)
# the program sends a ServiceAccount token: plain http only to the loopback (a local API proxy, the T2 tests)
API_URL = _pattern(r"https://[A-Za-z0-9.-]+(:[0-9]{1,5})?|http://(127\.0\.0\.1|localhost|\[::1\])(:[0-9]{1,5})?",
                   "an https URL of a host, e.g. https://kubernetes.default.svc (http only to 127.0.0.1 or localhost)",
                   255)
HOST = _pattern(r"[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*",
                "a host name or an IP address", 253)
OPTIONAL_HOST = _empty_or(HOST, "empty or a host name or an IP address")
REASON = _pattern(r" *[!-~][ -~]*", "printable ASCII text (not empty)", 200)
KUBE_CONTEXT = _pattern(r"[^\x00-\x1f\x7f]*", "a kubeconfig context name", 253)
SLURM_WORD = _pattern(r"[A-Za-z0-9_.-]+", "a plain word (letters, digits, '_', '.', '-')", 64)
SLURM_VERSION = _pattern(r"([0-9]{2}\.[0-9]{2}(\.[0-9]+)?)?", "empty or a Slurm version such as 24.11 or 24.11.6")
SLURM_STATE = _pattern(r"[A-Za-z_]+", "a Slurm node state such as DOWN or DYNAMIC_NORM", 32)
_HOSTNAME = r"(?:[A-Za-z0-9._-]|\[[0-9]+(?:-[0-9]+)?(?:,[0-9]+(?:-[0-9]+)?)*\])+"
HOSTLIST = _pattern(_HOSTNAME + "(?:," + _HOSTNAME + ")*", "a Slurm hostlist (e.g. ALL, slurmd-[0-3],gpu07)", 1024)
DB_IDENTIFIER = _pattern(r"[A-Za-z0-9_]+", "a MariaDB identifier (letters, digits, '_')", 64)
DB_USER = _pattern(r"[A-Za-z0-9_]+", "a MariaDB user name (letters, digits, '_')", 32)
MYSQLD_ARGUMENT = _pattern(r"--[a-z0-9][a-z0-9_-]*(=[!-~]+)?", "a mariadbd option such as --innodb-buffer-pool-size=256M", 256)
POSIX_USER = _pattern(r"[a-z_][a-z0-9_-]{0,31}", "a POSIX user name (lower case, at most 32 characters)")
SHELL = _pattern(r"/[A-Za-z0-9._/+-]+", "an absolute path of a shell, e.g. /bin/bash", 255)
CONFIGMAP_KEY = _pattern(r"[-._a-zA-Z0-9]+", "a ConfigMap key ([-._a-zA-Z0-9]+)", 253)
SLURM_KEY = _pattern(r"[A-Za-z][A-Za-z0-9]*", "a Slurm parameter name (letters and digits, e.g. SlurmctldDebug)", 64)


def _slurm_string(value, what):
    """One value of a Slurm key=value line (slurm.conf, cgroup.conf, slurmdbd.conf, node lines...).

    Slurm's parser (src/common/parse_config.c) splits a line at white space, starts a comment at '#',
    joins a line ending in '\\' with the next, and reads quotes: none of these may be in a value.
    """
    _no_control(value, what)
    _ascii(value, what)
    if value == "":
        raise _Fail("must not be empty (use null to remove a key)")
    if len(value) > 1024:
        raise _Fail("must be at most 1024 characters (got %d)" % len(value))
    for char, why in ((" ", "a space, which Slurm reads as the end of the value"),
                      ("#", "'#', which starts a comment in %s" % what),
                      ("\\", "a backslash, which Slurm reads as an escape or a line continuation"),
                      ('"', "a double quote, which Slurm reads as the start of a quoted value"),
                      ("'", "a single quote (not a character of any Slurm value)")):
        if char in value:
            raise _Fail("must not contain " + why)


def slurm_value(what):
    """A scalar or a list of scalars (joined with ',') as in our fmt() macro; None removes the key."""
    def rule(value):
        if value is None or isinstance(value, (bool, int, float)):
            return
        if isinstance(value, str):
            _slurm_string(value, what)
            return
        if isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, (bool, int, float)):
                    continue
                if not isinstance(item, str):
                    raise _Fail("list items must be strings or numbers, got %s" % type(item).__name__)
                _slurm_string(item, what)
                if "," in item:
                    raise _Fail("list items must not contain ',' (the list is joined with ',')")
            return
        raise _Fail("must be a string, number, boolean, list or null, got %s" % type(value).__name__)
    return rule


# --- structured values --------------------------------------------------------------------------


class Checker:
    """Walks one value and collects the problems of its parts."""

    def __init__(self, secret=False):
        self.problems = []
        self.secret = secret

    def run(self, where, rule, value):
        try:
            rule(self, where, value) if getattr(rule, "structured", False) else rule(value)
        except _Fail as fail:
            text = str(fail)
            if self.secret and "got " in text:
                text = text.split(", got ", 1)[0] + " (the value is secret and not shown)"
            self.problems.append(Problem(where, text))


def structured(function):
    function.structured = True
    return function


def list_of(rule):
    @structured
    def check(checker, where, value):
        if not isinstance(value, (list, tuple)):
            raise _Fail("must be a list, got %s" % type(value).__name__)
        for index, item in enumerate(value):
            checker.run("%s[%d]" % (where, index), rule, item)
    return check


def dict_of(key_rule, value_rule, key_name="key"):
    @structured
    def check(checker, where, value):
        if not isinstance(value, dict):
            raise _Fail("must be a mapping, got %s" % type(value).__name__)
        for key, item in value.items():
            before = len(checker.problems)
            checker.run("%s %s %r" % (where, key_name, key), key_rule, key)
            if len(checker.problems) == before:
                checker.run("%s[%r]" % (where, key), value_rule, item)
    return check


def slurm_conf(what, forbidden=(), first=None, fields=None):
    """A dict of Slurm keys (one file or one line); ``first`` is the key that starts the line; ``fields``
    gives some keys a stricter rule (e.g. Nodes: a hostlist)."""
    value_rule = slurm_value(what)
    fields = fields or {}

    @structured
    def check(checker, where, value):
        if not isinstance(value, dict):
            raise _Fail("must be a mapping of Slurm keys, got %s" % type(value).__name__)
        if first is not None and first not in value:
            raise _Fail("must set %s (it starts the line)" % first)
        seen = {}
        for key, item in value.items():
            before = len(checker.problems)
            checker.run("%s key %r" % (where, key), SLURM_KEY, key)
            if len(checker.problems) > before:
                continue
            if key.lower() in seen:
                checker.problems.append(Problem(where, "sets %s and %s: Slurm keys are case-insensitive"
                                                % (seen[key.lower()], key)))
            seen[key.lower()] = key
            if key in forbidden:
                checker.problems.append(Problem("%s key %r" % (where, key), forbidden[key]))
                continue
            if first is not None and key == first and item is None:
                checker.problems.append(Problem("%s[%r]" % (where, key), "must not be null (it names the line)"))
                continue
            checker.run("%s[%r]" % (where, key), fields.get(key, value_rule) if item is not None else value_rule, item)
    return check


def resources_dict():
    quantities = dict_of(RESOURCE_NAME, QUANTITY, "resource")

    @structured
    def check(checker, where, value):
        if not isinstance(value, dict):
            raise _Fail("must be a mapping {requests: {...}, limits: {...}}, got %s" % type(value).__name__)
        for key, item in value.items():
            if key not in ("requests", "limits"):
                checker.problems.append(Problem("%s key %r" % (where, key), "must be requests or limits"))
                continue
            checker.run("%s.%s" % (where, key), quantities, item)
    return check


def record(fields, required=(), allow_other=False):
    """A dict with known fields, each with its rule."""
    @structured
    def check(checker, where, value):
        if not isinstance(value, dict):
            raise _Fail("must be a mapping, got %s" % type(value).__name__)
        for name in required:
            if name not in value:
                checker.problems.append(Problem(where, "must set %s" % name))
        for key, item in value.items():
            if key not in fields:
                if not allow_other:
                    close = difflib.get_close_matches(str(key), list(fields), n=1)
                    hint = " (did you mean %s?)" % close[0] if close else ""
                    checker.problems.append(Problem("%s key %r" % (where, key), "is not a known field%s; known: %s"
                                                    % (hint, ", ".join(sorted(fields)))))
                continue
            # None: a field the argument spec's suboptions filled in (absent), or a null that means "unset"
            if fields[key] is not None and item is not None:
                checker.run("%s.%s" % (where, key), fields[key], item)
    return check


# --- authorized_keys ----------------------------------------------------------------------------

# Key type: the number of length-prefixed strings of its public key blob (RFC 4253 6.6, RFC 5656 3.1,
# RFC 8709 4, OpenSSH PROTOCOL.u2f), the type name included.
KEY_FIELDS = {"ssh-ed25519": 2, "ssh-rsa": 3, "ecdsa-sha2-nistp256": 3, "ecdsa-sha2-nistp384": 3,
              "ecdsa-sha2-nistp521": 3, "sk-ssh-ed25519@openssh.com": 3, "sk-ecdsa-sha2-nistp256@openssh.com": 4}
KEY_TYPES = tuple(KEY_FIELDS)


def _key_fields(blob):
    fields, offset = [], 0
    while offset < len(blob):
        (length,) = struct.unpack(">I", blob[offset:offset + 4])
        if offset + 4 + length > len(blob):
            raise ValueError("truncated")
        fields.append(blob[offset + 4:offset + 4 + length])
        offset += 4 + length
    return fields


def authorized_key(value):
    """One public key per entry: "<type> <base64> [comment]", no options (none are documented)."""
    value = _string(value)
    _no_control(value, "authorized_keys")
    _ascii(value, "authorized_keys")
    if len(value) > 16384:
        raise _Fail("must be at most 16384 characters (got %d)" % len(value))
    parts = value.strip(" ").split(" ", 2)
    if parts[0] not in KEY_TYPES:
        raise _Fail("must start with a key type (%s); options such as from= or command= are not accepted"
                    % ", ".join(KEY_TYPES))
    if len(parts) < 2:
        raise _Fail("must have the base64 key after the type")
    try:
        blob = base64.b64decode(parts[1], validate=True)
        fields = _key_fields(blob)
        embedded = fields[0].decode("ascii") if fields else ""
    except (binascii.Error, struct.error, UnicodeDecodeError, ValueError):
        raise _Fail("must have a valid base64 key after the type") from None
    if base64.b64encode(blob).decode("ascii") != parts[1]:
        raise _Fail("must have the key in canonical base64 (as ssh-keygen writes it)")
    if embedded != parts[0]:
        raise _Fail("is a %s key labelled %s" % (embedded[:40], parts[0]))
    if len(fields) != KEY_FIELDS[parts[0]] or (parts[0] == "ssh-ed25519" and len(fields[1]) != 32):
        raise _Fail("must be a complete %s public key (its key data has the wrong structure)" % parts[0])
    if len(parts) == 3 and re.search(r"(^|\s)(ssh-|ecdsa-|sk-)\S+\s+AAAA", parts[2]):
        raise _Fail("has a second key in its comment: one key per entry")


# --- rules of every variable --------------------------------------------------------------------

_TIMEOUT = _int_range(1, 7 * 86400, " seconds")
_GRACE = _int_range(0, 86400, " seconds")
_NODE_CONF_FORBIDDEN = {key: "is set by the collection (from the pod name, cpus, memory_mib and features)"
                        for key in ("NodeName", "CPUs", "RealMemory", "Feature", "Features")}
# burst nodes are State=CLOUD: the power-save program depends on it
_BURST_NODE_CONF_FORBIDDEN = dict(_NODE_CONF_FORBIDDEN, State="is CLOUD for burst nodes (set by the collection)")
_SLURM_CONF_FORBIDDEN = {key: "must not be set here: use config_nodes, config_partitions or config_nodesets"
                         for key in ("NodeName", "PartitionName", "NodeSet")}
_SLURMDBD_FORBIDDEN = {key: "comes from the database role (database_*), not slurmdbd_conf"
                       for key in ("StorageType", "StorageHost", "StoragePort", "StorageUser", "StoragePass",
                                   "StorageLoc")}
# the authentication is one setting for every daemon and command (the override dicts only: the defaults
# derive these keys from it)
_AUTH_FORBIDDEN = {key: "comes from cluster_auth_type (munge or slurm), one setting for every daemon"
                   for key in ("AuthType", "CredType")}
# MetricsType follows cluster_metrics_enabled, whose image check an override would bypass
_METRICS_FORBIDDEN = {"MetricsType": "comes from cluster_metrics_enabled (checked against the Slurm version of every image)"}
_TOLERATION = record({
    "key": _empty_or(LABEL_KEY, "empty or a label key"),
    "operator": _pattern(r"Exists|Equal", "Exists or Equal"),
    "value": LABEL_VALUE,
    "effect": _pattern(r"(NoSchedule|PreferNoSchedule|NoExecute)?", "NoSchedule, PreferNoSchedule or NoExecute"),
    "tolerationSeconds": _int_range(0, 2 ** 31 - 1, " seconds"),
})
# Slurm account and QoS names (sacctmgr lower-cases them; the values of their fields are checked by
# the cross rule _accounting_rules, with the module's own parser)
ACCOUNTING_NAME = _pattern(r"[A-Za-z0-9_][A-Za-z0-9_.@-]*", "a Slurm account or QoS name (letters, digits, "
                           "'_', '.', '-', '@')", 64)
_ADMIN_LEVEL = _pattern(r"(?i)none|operator|administrator", "none, operator or administrator")

_USER = record({
    "name": POSIX_USER,
    "uid": _int_range(1000, 2 ** 31 - 2),
    "gid": _int_range(1000, 2 ** 31 - 2),
    "shell": SHELL,
    "authorized_keys": list_of(authorized_key),
    "account": _empty_or(ACCOUNTING_NAME, "empty (config_default_account) or a Slurm account name"),
    "accounts": list_of(ACCOUNTING_NAME),
    "admin_level": _ADMIN_LEVEL,
}, required=("name", "uid"))
_STATE = _pattern(r"present|absent", "present or absent")
_QOS = record(dict({"name": ACCOUNTING_NAME, "state": _STATE, "preempt": list_of(ACCOUNTING_NAME),
                    "flags": list_of(SLURM_WORD)},
                   **dict((name, None) for name in (
                       "description", "priority", "preempt_mode", "grp_tres", "max_tres_per_user",
                       "max_tres_per_job", "max_jobs_per_user", "max_submit_jobs_per_user", "max_wall"))),
              required=("name",))
_ACCOUNT = record(dict({"name": ACCOUNTING_NAME, "state": _STATE, "parent": ACCOUNTING_NAME,
                        "qos": list_of(ACCOUNTING_NAME), "default_qos": ACCOUNTING_NAME},
                       **dict((name, None) for name in ("description", "organization", "fairshare"))),
                  required=("name",))
_MANAGED_LABELS = ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component",
                   "app.kubernetes.io/part-of", "app.kubernetes.io/managed-by")


def _cluster_label_key(value):
    LABEL_KEY(value)
    if value in _MANAGED_LABELS:
        raise _Fail("is managed by the collection (%s)" % ", ".join(_MANAGED_LABELS))


def _annotation_value(value):
    value = _string(value)
    if "\x00" in value:
        raise _Fail("must not contain a NUL byte")
    if len(value) > 65536:
        raise _Fail("must be at most 65536 characters (got %d)" % len(value))


def _file_content(value):
    value = _string(value)
    if "\x00" in value:
        raise _Fail("must not contain a NUL byte")
    if "\r" in value:
        raise _Fail("must not contain a carriage return (\\r): Slurm reads it as part of a value")
    if len(value) > 512 * 1024:
        raise _Fail("must be at most 512 KiB (a ConfigMap holds 1 MiB in all)")


def _extra_file_name(value):
    CONFIGMAP_KEY(value)
    if value in ("slurm.conf", "cgroup.conf", "slurmdbd.conf"):
        raise _Fail("is written by the collection: use config_slurm_conf, config_cgroup_conf or slurmdbd_conf")
    if value in ("slurm.key", "slurm.jwks"):
        raise _Fail("is auth/slurm's key, never in a ConfigMap: cluster_auth_type slurm makes it (a Secret)")


@structured
def _extra_files(checker, where, value):
    """Files in Slurm's key=value format (*.conf) are checked line by line; other files as text."""
    if not isinstance(value, dict):
        raise _Fail("must be a mapping of file name: content, got %s" % type(value).__name__)
    for name, content in value.items():
        before = len(checker.problems)
        checker.run("%s file name %r" % (where, name), _extra_file_name, name)
        checker.run("%s[%r]" % (where, name), _file_content, content)
        if len(checker.problems) > before or not str(name).endswith(".conf"):
            continue
        for number, line in enumerate(content.split("\n"), 1):
            body = line.split("#", 1)[0].strip()
            for token in body.split():
                key, sep, item = token.partition("=")
                if not sep or not re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", key) or item == "":
                    checker.problems.append(Problem("%s[%r] line %d" % (where, name, number),
                                                    "must be Slurm key=value pairs separated by spaces (got %s)"
                                                    % _shown(token)))
                    break


def _connection_key(value):
    _pattern(r"ansible_[a-z0-9_]+", "an ansible_* connection variable")(value)


_CONNECTION = dict_of(_connection_key, _any, "variable")

# The powersave role's group fields (roles/powersave/defaults: powersave_group_defaults) and their rules.
_GROUP_FIELDS = {
    "name": _pattern(r"[a-z]([-a-z0-9]{0,30}[a-z0-9])?", "a DNS label of at most 32 characters starting with a letter"),
    "count": _int_range(1, 10000, " nodes"),
    "cpus": _int_range(1, 4096),
    "cpu_request": CPU_REQUEST,
    "memory_mib": _int_range(256, 2 ** 31 - 1, " MiB"),
    "real_memory_percent": _int_range(50, 100, " %"),
    "features": list_of(SLURM_WORD),
    "node_conf": slurm_conf("a NodeName line of slurm.conf", _BURST_NODE_CONF_FORBIDDEN),
    "extra_resources": dict_of(RESOURCE_NAME, QUANTITY, "resource"),
    "partition": _empty_or(SLURM_WORD, "empty (the group name) or a partition name"),
    "partition_conf": slurm_conf("a PartitionName line of slurm.conf",
                                 {"PartitionName": "comes from partition", "Nodes": "is the group's nodes"}),
    "suspend_time": _int_range(1, 365 * 86400, " seconds"),
    "suspend_timeout": _int_range(5, 86400, " seconds"),
    "resume_timeout": _int_range(30, 86400, " seconds"),
    "suspend_grace_period": _one_of(_null, _int_range(0, 86400), description="null or seconds within 0-86400"),
    "node_selector": dict_of(LABEL_KEY, LABEL_VALUE, "label"),
    "tolerations": list_of(_TOLERATION),
    "image": OPTIONAL_IMAGE,
}

# the bcrypt hash of a password (Modular Crypt Format: $2b$<cost>$<22 characters of salt><31 of hash>)
BCRYPT_HASH = _pattern(r"\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}",
                       "a bcrypt hash such as $2b$12$... (python3 -c 'import bcrypt; print(bcrypt.hashpw(...))'), "
                       "never the password", 60)
WEB_URL = _pattern(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[!-~]*)?", "an http(s) URL of a host", 2048)
# a default and the bound a portal user may not exceed (portal_job_options)
_BOUNDS = record({"default": _int_range(1, 2 ** 31 - 1), "max": _int_range(1, 2 ** 31 - 1)}, required=("default", "max"))

RULES = {
    # cluster
    "cluster_name": CLUSTER_NAME,
    "cluster_namespace": DNS1123_LABEL,
    "cluster_create_namespace": _any,
    "cluster_pod_security": _any,
    "cluster_labels": dict_of(_cluster_label_key, LABEL_VALUE, "label"),
    "cluster_adopt_instance": _empty_or(CLUSTER_NAME, "empty or an instance name"),
    "cluster_unknown_variables": _any,
    "cluster_render_dir": ABSOLUTE_OR_EMPTY_PATH,
    "cluster_render_command": list_of(_pattern(r"[^\x00\n\r]*", "a command argument", 4096)),
    "cluster_manage_slurm": _any,
    "cluster_kubeconfig": CONTROLLER_PATH,
    "cluster_context": KUBE_CONTEXT,
    "cluster_require_credentials": _any,
    "cluster_wait_timeout": _TIMEOUT,
    "cluster_image": IMAGE_REPOSITORY,
    "cluster_daemon_image": IMAGE_REPOSITORY,
    "cluster_image_tag": IMAGE_TAG,
    "cluster_image_pull_policy": _any,
    "cluster_image_pull_secrets": list_of(DNS1123_SUBDOMAIN),
    "cluster_network_policies": _any,
    "cluster_slurmctld_connection": _CONNECTION,
    "cluster_slurmrestd_enabled": _any,
    "cluster_auth_type": _any,
    "cluster_configless": _any,
    "cluster_metrics_enabled": _any,
    "cluster_portal_enabled": _any,
    # config
    "config_slurm_conf_default": slurm_conf("slurm.conf", _SLURM_CONF_FORBIDDEN),
    "config_slurm_conf": slurm_conf("slurm.conf", {**_SLURM_CONF_FORBIDDEN, **_AUTH_FORBIDDEN, **_METRICS_FORBIDDEN}),
    "config_nodesets": list_of(slurm_conf("a NodeSet line of slurm.conf", first="NodeSet", fields={"Nodes": HOSTLIST})),
    "config_nodes": list_of(slurm_conf("a NodeName line of slurm.conf", first="NodeName")),
    "config_partitions": list_of(slurm_conf("a PartitionName line of slurm.conf", first="PartitionName",
                                            fields={"Nodes": HOSTLIST})),
    "config_cgroup_conf_default": slurm_conf("cgroup.conf"),
    "config_cgroup_conf": slurm_conf("cgroup.conf"),
    "config_extra_files": _extra_files,
    "config_users": list_of(_USER),
    "config_qos": list_of(_QOS),
    "config_accounts": list_of(_ACCOUNT),
    "config_default_account": ACCOUNTING_NAME,
    "config_accounting_purge": _any,
    # database
    "database_mode": _any,
    "database_name": DB_IDENTIFIER,
    "database_user": DB_USER,
    "database_image": IMAGE,
    "database_storage_size": SIZE,
    "database_storage_class": OPTIONAL_SUBDOMAIN,
    "database_server_args": list_of(MYSQLD_ARGUMENT),
    "database_resources": resources_dict(),
    "database_external_host": OPTIONAL_HOST,
    "database_external_port": _int_range(1, 65535),
    # written as StoragePass= of slurmdbd.conf
    "database_external_password": _empty_or(lambda v: _slurm_string(_string(v), "slurmdbd.conf"),
                                            "empty or a slurmdbd.conf value (printable ASCII without "
                                            "spaces, '#', quotes or backslashes)"),
    "database_external_password_secret": record({"name": DNS1123_SUBDOMAIN, "key": CONFIGMAP_KEY}),
    # login
    "login_image": IMAGE,
    "login_service_type": _any,
    "login_node_port": _one_of(_int_range(0, 0), _int_range(30000, 32767),
                               description="0 (chosen by Kubernetes) or within 30000-32767"),
    "login_service_annotations": dict_of(LABEL_KEY, _annotation_value, "annotation"),
    "login_resources": resources_dict(),
    # powersave
    "powersave_groups": list_of(record(_GROUP_FIELDS, required=("name", "count"))),
    "powersave_group_defaults": record({k: v for k, v in _GROUP_FIELDS.items() if k not in ("name", "count")}),
    "powersave_suspend_exc_states": list_of(SLURM_STATE),
    "powersave_resume_rate": _int_range(0, 65535, " nodes per minute"),
    "powersave_suspend_rate": _int_range(0, 65535, " nodes per minute"),
    "powersave_slurm_conf_extra": slurm_conf("slurm.conf", {**_SLURM_CONF_FORBIDDEN, **_AUTH_FORBIDDEN}),
    "powersave_image": IMAGE,
    "powersave_termination_grace_period": _GRACE,
    "powersave_wait_timeout": _TIMEOUT,
    "powersave_api_server": API_URL,
    "powersave_mount_path": CONTAINER_PATH,
    "powersave_token_path": CONTAINER_PATH,
    # Kubernetes accepts 600 s to 2^32 s for a projected service account token
    "powersave_token_expiration_seconds": _int_range(600, 2 ** 32, " seconds"),
    "powersave_program": CONTAINER_PATH,
    "powersave_log_file": CONTAINER_PATH,
    "powersave_scontrol": CONTAINER_PATH,
    "powersave_slurm_conf_path": CONTAINER_PATH,
    "powersave_request_timeout": _int_range(1, 300, " seconds"),
    "powersave_terminating_wait": _int_range(0, 3600, " seconds"),
    "powersave_owner_statefulset": DNS1123_SUBDOMAIN,
    "powersave_slurmctld_service_account": DNS1123_SUBDOMAIN,
    "powersave_burst_service_account": DNS1123_SUBDOMAIN,
    # resources (set by the roles themselves)
    "resources_definitions": _any,
    "resources_state": _any,
    "resources_wait": _any,
    # scale
    "scale_wait_for_jobs": _any,
    "scale_wait_timeout": _TIMEOUT,
    "scale_reason": REASON,
    "scale_nodes_timeout": _TIMEOUT,
    # secrets
    "secrets_munge_key_length": _int_range(32, 1024, " characters"),
    "secrets_password_length": _int_range(16, 128, " characters"),
    "secrets_ssh_host_key_types": _any,
    "secrets_regenerate": _any,
    "secrets_rotation": dict_of(_pattern(r"database|jwt|ssh|munge|auth", "database, jwt, ssh, munge or auth"),
                                REASON, "secret"),
    "secrets_munge_rotation_allowed": _any,
    # slurmctld
    "slurmctld_image": IMAGE,
    "slurmctld_allow_newer_major": _any,
    "slurmctld_state_size": SIZE,
    "slurmctld_state_storage_class": OPTIONAL_SUBDOMAIN,
    "slurmctld_resources": resources_dict(),
    "slurmctld_wait_timeout": _TIMEOUT,
    "slurmctld_health_accounting": _any,
    "slurmctld_termination_grace_period": _GRACE,
    "slurmctld_metrics_paths": list_of(_any),
    "slurmctld_metrics_scraper_pod_labels": dict_of(LABEL_KEY, LABEL_VALUE, "label"),
    "slurmctld_metrics_scraper_namespace_labels": dict_of(LABEL_KEY, LABEL_VALUE, "label"),
    "slurmctld_metrics_service_monitor": _any,
    "slurmctld_metrics_service_monitor_labels": dict_of(LABEL_KEY, LABEL_VALUE, "label"),
    "slurmctld_metrics_scrape_interval": _pattern(r"([0-9]+(ms|s|m|h))+", "a Prometheus duration such as 30s or 1m", 32),
    "slurmctld_metrics_dashboard": _any,
    # slurmrestd
    "slurmrestd_image": IMAGE,
    "slurmrestd_replicas": _int_range(1, 100, " pods"),
    "slurmrestd_port": _int_range(1024, 65535),
    "slurmrestd_service_type": _any,
    "slurmrestd_node_port": _one_of(_int_range(0, 0), _int_range(30000, 32767),
                                    description="0 (chosen by Kubernetes) or within 30000-32767"),
    "slurmrestd_service_annotations": dict_of(LABEL_KEY, _annotation_value, "annotation"),
    "slurmrestd_resources": resources_dict(),
    "slurmrestd_token_user": _empty_or(POSIX_USER, "empty or a user name"),
    "slurmrestd_token_secret": _empty_or(DNS1123_SUBDOMAIN, "empty or a Secret name"),
    # scontrol token lifespan=: at least a second, at most ten years
    "slurmrestd_token_lifespan": _int_range(1, 10 * 366 * 86400, " seconds"),
    "slurmrestd_token_renew_before": _int_range(0, 10 * 366 * 86400, " seconds"),
    # portal
    "portal_image": IMAGE,
    "portal_port": _int_range(1024, 65535),
    "portal_service_type": _any,
    "portal_node_port": _one_of(_int_range(0, 0), _int_range(30000, 32767),
                                description="0 (chosen by Kubernetes) or within 30000-32767"),
    "portal_service_annotations": dict_of(LABEL_KEY, _annotation_value, "annotation"),
    "portal_tls_secret": _empty_or(DNS1123_SUBDOMAIN, "empty or the name of a kubernetes.io/tls Secret"),
    "portal_auth": _any,
    "portal_users": list_of(record({"name": POSIX_USER, "password_hash": BCRYPT_HASH}, required=("name", "password_hash"))),
    "portal_oidc": record({
        "authorize_url": _empty_or(WEB_URL, "empty or an http(s) URL"),
        "token_url": _empty_or(WEB_URL, "empty or an http(s) URL"),
        "userdata_url": _empty_or(WEB_URL, "empty or an http(s) URL"),
        "callback_url": _empty_or(WEB_URL, "empty or an http(s) URL"),
        "client_id": _pattern(r"[!-~]*", "printable ASCII without spaces", 255),
        "client_secret_secret": _empty_or(DNS1123_SUBDOMAIN, "empty or a Secret name"),
        "client_secret_key": CONFIGMAP_KEY,
        "username_claim": _pattern(r"[A-Za-z0-9_.:-]+", "a claim name (letters, digits, '_', '.', ':', '-')", 128),
        "scope": list_of(_pattern(r"[!-~]+", "a scope (printable ASCII without spaces)", 128)),
        "allowed_users": list_of(POSIX_USER),
    }),
    "portal_job_options": record({"partitions": list_of(SLURM_WORD), "cpus": _BOUNDS, "memory_mb": _BOUNDS,
                                  "time_minutes": _BOUNDS}, required=("partitions", "cpus", "memory_mb", "time_minutes")),
    "portal_start_timeout": _int_range(30, 86400, " seconds"),
    "portal_storage_size": SIZE,
    "portal_storage_class": OPTIONAL_SUBDOMAIN,
    "portal_resources": resources_dict(),
    # slurmd
    "slurmd_image": IMAGE,
    "slurmd_replicas": _int_range(0, 65533, " nodes"),
    "slurmd_cpus": _int_range(1, 4096),
    "slurmd_cpu_request": CPU_REQUEST,
    "slurmd_memory_mib": _int_range(256, 2 ** 31 - 1, " MiB"),
    "slurmd_real_memory_percent": _int_range(50, 100, " %"),
    "slurmd_features": list_of(SLURM_WORD),
    "slurmd_node_conf": slurm_conf("a NodeName line of slurm.conf", _NODE_CONF_FORBIDDEN),
    "slurmd_extra_resources": dict_of(RESOURCE_NAME, QUANTITY, "resource"),
    "slurmd_host_network": _any,
    "slurmd_privileged": _any,
    "slurmd_termination_grace_period": _GRACE,
    "slurmd_node_selector": dict_of(LABEL_KEY, LABEL_VALUE, "label"),
    "slurmd_tolerations": list_of(_TOLERATION),
    "slurmd_wait_timeout": _TIMEOUT,
    "slurmd_rollout_policy": _any,
    "slurmd_rollout_max_unavailable": _one_of(_int_range(1, 65533), _pattern(r"[1-9][0-9]{0,4}|([1-9][0-9]?|100)%", ""),
                                              description='a count from 1 or a percentage within 1%-100% such as "25%"'),
    "slurmd_rollout_wait_timeout": _TIMEOUT,
    "slurmd_rollout_reason": REASON,
    # slurmdbd
    "slurmdbd_image": IMAGE,
    "slurmdbd_conf_default": slurm_conf("slurmdbd.conf", _SLURMDBD_FORBIDDEN),
    "slurmdbd_conf": slurm_conf("slurmdbd.conf", {**_SLURMDBD_FORBIDDEN, **_AUTH_FORBIDDEN}),
    "slurmdbd_resources": resources_dict(),
    "slurmdbd_wait_timeout": _TIMEOUT,
    # storage
    "storage_mode": _any,
    "storage_class": OPTIONAL_SUBDOMAIN,
    "storage_home_size": SIZE,
    "storage_home_access_modes": _any,
    "storage_nfs_image": IMAGE,
    "storage_nfs_server": OPTIONAL_HOST,
    "storage_nfs_resources": resources_dict(),
    # teardown
    "teardown_force": _any,
    "teardown_delete_volumes": _any,
    # upgrade
    "upgrade_phase": _any,
    "upgrade_mode": _any,
    "upgrade_nodes": list_of(HOSTLIST),
    "upgrade_reason": REASON,
    "upgrade_wait_for_jobs": _any,
    "upgrade_wait_timeout": _TIMEOUT,
    "upgrade_backup": _any,
    "upgrade_backup_dir": CONTROLLER_PATH,
    "upgrade_state_file": CONTROLLER_PATH,
    "upgrade_slurmdbd_timeout": _TIMEOUT,
    "upgrade_nodes_timeout": _TIMEOUT,
    "upgrade_slurm_version": SLURM_VERSION,
    "upgrade_slurmdbd_connection": _CONNECTION,
}

# Variables whose values are never shown in a message.
SECRET_VARIABLES = frozenset({"database_external_password", "portal_users"})

# Facts the roles publish for each other (set_fact names without a leading '_'); not user input.
ROLE_OUTPUTS = frozenset({
    "cluster_model", "cluster_api_auth", "cluster_preflight_passed",
    "config_checksums", "database_connection", "resources_changed_by", "secrets_checksums", "secrets_rotating",
    "powersave_node_count", "powersave_slurm_conf", "powersave_slurm_conf_lines", "powersave_slurm_conf_nodes",
    "powersave_slurm_conf_partitions", "powersave_slurm_images", "powersave_slurmctld_volume_mounts",
    "powersave_slurmctld_volumes",
})

# Variables that Azimuth's CaaS operator passes to every cluster type (they share our prefix cluster_).
AZIMUTH_VARIABLES = frozenset({
    "cluster_id", "cluster_type", "cluster_state", "cluster_user_ssh_public_key", "cluster_deploy_ssh_public_key",
    "cluster_ssh_private_key_file", "cluster_upgrade_system_packages", "cluster_floating_ip",
    "cluster_floating_ip_address", "cluster_gateway_ip", "cluster_network", "cluster_image",
})

PREFIXES = tuple(sorted({name.split("_", 1)[0] + "_" for name in RULES}))


def _effective_conf(values, default_name, override_name):
    conf = {}
    for name in (default_name, override_name):
        if isinstance(values.get(name), dict):
            conf.update(values[name])
    return {key: value for key, value in conf.items() if value is not None}


def _cross_rules(values):
    """Rules across variables, checked when every variable they read is known."""
    problems = []
    conf = _effective_conf(values, "config_slurm_conf_default", "config_slurm_conf")
    replicas = values.get("slurmd_replicas")
    max_nodes = conf.get("MaxNodeCount")
    if isinstance(replicas, int) and not isinstance(max_nodes, bool) and str(max_nodes).isdigit() \
            and replicas > int(max_nodes):
        problems.append(Problem("slurmd_replicas", "must be at most MaxNodeCount of slurm.conf (%s, from "
                                "config_slurm_conf): raise config_slurm_conf.MaxNodeCount to run %d workers"
                                % (max_nodes, replicas)))
    if "cluster_name" in values and "ClusterName" in conf and conf["ClusterName"] != values["cluster_name"]:
        problems.append(Problem("config_slurm_conf['ClusterName']", "must equal cluster_name (%s)"
                                % values["cluster_name"]))
    if "SlurmctldHost" in conf and conf["SlurmctldHost"] != "slurmctld-0(slurmctld)":
        problems.append(Problem("config_slurm_conf['SlurmctldHost']", "must stay slurmctld-0(slurmctld), the pod "
                                "and Service of the slurmctld role"))
    dbd = _effective_conf(values, "slurmdbd_conf_default", "slurmdbd_conf")
    if "DbdHost" in dbd and dbd["DbdHost"] not in ("slurmdbd-0", "localhost"):
        problems.append(Problem("slurmdbd_conf['DbdHost']", "must stay slurmdbd-0 (the pod's host name)"))
    if "DbdPort" in dbd and str(dbd["DbdPort"]) != "6819":
        problems.append(Problem("slurmdbd_conf['DbdPort']", "must stay 6819 (the Service port)"))
    cpus, request = values.get("slurmd_cpus"), values.get("slurmd_cpu_request")
    if isinstance(cpus, int) and isinstance(request, str) and request and _cores(request) is not None:
        if not 0 < _cores(request) <= cpus:
            problems.append(Problem("slurmd_cpu_request", "must be above 0 and no larger than slurmd_cpus (%d)" % cpus))
    unavailable = values.get("slurmd_rollout_max_unavailable")
    if isinstance(unavailable, str) and unavailable.isdigit():
        unavailable = int(unavailable)
    if isinstance(replicas, int) and isinstance(unavailable, int) and not isinstance(unavailable, bool) \
            and replicas > 0 and unavailable > replicas:
        problems.append(Problem("slurmd_rollout_max_unavailable", "must be at most slurmd_replicas (%d), got %d; "
                                'a percentage such as "25%%" follows the replicas' % (replicas, unavailable)))
    problems += _restd_rules(values) + _portal_rules(values)
    problems += _group_rules(values) + _partition_rules(values) + _user_rules(values) + _accounting_rules(values)
    return problems


# ports that Slurm's daemons listen on (slurmctld, slurmd, slurmdbd): a REST API on one of them would
# be taken for that daemon by clients, probes and NetworkPolicies
_SLURM_DAEMON_PORTS = {6817: "slurmctld", 6818: "slurmd", 6819: "slurmdbd"}


def _restd_rules(values):
    problems = []
    port = _scalar(values.get("slurmrestd_port"))
    if port in _SLURM_DAEMON_PORTS:
        problems.append(Problem("slurmrestd_port", "must differ from the Slurm daemon ports 6817-6819 (%s is %s's)"
                                % (port, _SLURM_DAEMON_PORTS[port])))
    node_port = _scalar(values.get("slurmrestd_node_port"))
    if node_port and node_port == _scalar(values.get("login_node_port")):
        problems.append(Problem("slurmrestd_node_port", "must differ from login_node_port (%s): one node port "
                                "serves one Service" % node_port))
    lifespan, renew = _scalar(values.get("slurmrestd_token_lifespan")), _scalar(values.get("slurmrestd_token_renew_before"))
    if isinstance(lifespan, int) and isinstance(renew, int) and renew >= lifespan:
        problems.append(Problem("slurmrestd_token_renew_before", "must be shorter than slurmrestd_token_lifespan (%d), "
                                "else every run issues a new token" % lifespan))
    return problems


def _slurm_minutes(text):
    """A Slurm time limit in whole minutes (MaxTime: minutes, [days-]hours:minutes:seconds...); None for
    INFINITE/UNLIMITED or a value this does not read (slurmctld reads it)."""
    text = str(text).strip()
    if text.upper() in ("INFINITE", "UNLIMITED"):
        return None
    found = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text)
    if not found:
        return None
    days, first, second, third = (int(part) if part else None for part in found.groups())
    if days is not None:       # days-hours[:minutes[:seconds]]
        return days * 1440 + first * 60 + (second or 0)
    if third is not None:      # hours:minutes:seconds
        return first * 60 + second
    return first               # minutes[:seconds]


def _node_sizes(values):
    """partition -> (CPUs, RealMemory in MB) of its nodes, where the variables tell: the powersave groups'
    partitions, and every other partition of config_partitions holding the slurmd pods."""
    sizes = {}
    cpus, memory, percent = (_scalar(values.get(name)) for name in ("slurmd_cpus", "slurmd_memory_mib",
                                                                    "slurmd_real_memory_percent"))
    partitions = values.get("config_partitions")
    if isinstance(cpus, int) and isinstance(memory, int) and isinstance(percent, int) and isinstance(partitions, list):
        for partition in partitions:
            if isinstance(partition, dict) and _scalar(partition.get("PartitionName")) is not None:
                sizes[str(partition["PartitionName"])] = (cpus, memory * percent // 100)
    groups, defaults = values.get("powersave_groups"), values.get("powersave_group_defaults") or {}
    if isinstance(groups, list) and isinstance(defaults, dict):
        for raw in groups:
            if isinstance(raw, dict):
                group = dict(defaults, **raw)
                name = _scalar(group.get("partition")) or _scalar(group.get("name"))
                if name is not None and all(isinstance(group.get(k), int) for k in ("cpus", "memory_mib", "real_memory_percent")):
                    sizes[str(name)] = (group["cpus"], group["memory_mib"] * group["real_memory_percent"] // 100)
    return sizes


def _portal_rules(values):
    """The portal's settings against the cluster's users and partitions, when the portal is deployed."""
    if values.get("cluster_portal_enabled") is not True:
        return []
    problems = []
    users = values.get("config_users")
    known = {str(user.get("name")) for user in users if isinstance(user, dict)} if isinstance(users, list) else None
    auth = values.get("portal_auth", "local")
    if auth == "local":
        portal_users = values.get("portal_users")
        if isinstance(portal_users, list):
            if not portal_users:
                problems.append(Problem("portal_users", "must list at least one user with a password hash when "
                                        "portal_auth is local (no one could log in)"))
            seen = set()
            for index, user in enumerate(portal_users):
                name = _scalar(user.get("name")) if isinstance(user, dict) else None
                if name is None:
                    continue
                if known is not None and name not in known:
                    problems.append(Problem("portal_users[%d] (%s)" % (index, name), "is not a user of config_users: "
                                            "a portal user runs their notebooks as that Unix user"))
                if name in seen:
                    problems.append(Problem("portal_users[%d] (%s)" % (index, name), "is listed twice"))
                seen.add(name)
    oidc = values.get("portal_oidc")
    if auth == "oidc" and isinstance(oidc, dict):
        for field in ("authorize_url", "token_url", "userdata_url", "callback_url", "client_id", "client_secret_secret"):
            if not oidc.get(field):
                problems.append(Problem("portal_oidc.%s" % field, "must be set when portal_auth is oidc"))
        for index, name in enumerate(oidc.get("allowed_users") or []):
            if known is not None and isinstance(name, str) and name not in known:
                problems.append(Problem("portal_oidc.allowed_users[%d] (%s)" % (index, name),
                                        "is not a user of config_users"))
    options = values.get("portal_job_options")
    if isinstance(options, dict):
        problems += _portal_option_rules(values, options)
    node_port = _scalar(values.get("portal_node_port"))
    for other in ("login_node_port", "slurmrestd_node_port"):
        if node_port and node_port == _scalar(values.get(other)):
            problems.append(Problem("portal_node_port", "must differ from %s (%s): one node port serves one Service"
                                    % (other, node_port)))
    return problems


def _portal_option_rules(values, options):
    problems = []
    for field in ("cpus", "memory_mb", "time_minutes"):
        bounds = options.get(field)
        if isinstance(bounds, dict) and isinstance(bounds.get("default"), int) and isinstance(bounds.get("max"), int) \
                and bounds["default"] > bounds["max"]:
            problems.append(Problem("portal_job_options.%s.default" % field, "must be at most its max (%d), got %d"
                                    % (bounds["max"], bounds["default"])))
    partitions = values.get("config_partitions")
    if not isinstance(partitions, list):
        return problems
    confs = {str(p.get("PartitionName")): p for p in partitions if isinstance(p, dict)}
    sizes = _node_sizes(values)
    offered = options.get("partitions")
    if not isinstance(offered, list):
        return problems
    if not offered:
        default = [name for name, conf in confs.items() if conf.get("Default") in (True, "YES", "yes", "Yes")]
        offered = default[:1] or list(confs)[:1]
    for index, name in enumerate(offered):
        where = "portal_job_options.partitions[%d] (%s)" % (index, name)
        if name not in sizes and name not in confs:
            problems.append(Problem(where, "is not a partition of this cluster (%s)" % ", ".join(sorted(set(confs) | set(sizes)))))
            continue
        conf = confs.get(name, {})
        cpus, memory = sizes.get(name, (None, None))
        for field, unit, limit, source in (
                ("cpus", "CPUs", cpus, "the CPUs of its nodes"),
                ("cpus", "CPUs", _int_or_none(conf.get("MaxCPUsPerNode")), "its MaxCPUsPerNode"),
                ("memory_mb", "MB", memory, "the RealMemory of its nodes"),
                ("memory_mb", "MB", _int_or_none(conf.get("MaxMemPerNode")), "its MaxMemPerNode"),
                ("time_minutes", "minutes", _slurm_minutes(conf["MaxTime"]) if "MaxTime" in conf else None,
                 "its MaxTime")):
            bound = (options.get(field) or {}).get("max") if isinstance(options.get(field), dict) else None
            if isinstance(bound, int) and limit is not None and bound > limit:
                problems.append(Problem("portal_job_options.%s.max" % field, "%d %s exceeds partition %s (%s: %d %s)"
                                        % (bound, unit, name, source, limit, unit)))
    return problems


def _int_or_none(value):
    value = _scalar(value)
    return int(value) if value is not None and str(value).isdigit() else None


def _scalar(value):
    """The value if it can be compared (a string or a number), else None: the rule of its own field
    reports a wrong type."""
    return value if isinstance(value, (str, int, float)) and not isinstance(value, bool) else None


def _partition_rules(values):
    problems, names, defaults = [], set(), []
    partitions = values.get("config_partitions")
    for index, partition in enumerate(partitions if isinstance(partitions, list) else []):
        if not isinstance(partition, dict):
            continue
        name = _scalar(partition.get("PartitionName"))
        if name is not None and name in names:
            problems.append(Problem("config_partitions[%d]" % index, "PartitionName %s is used twice" % name))
        names.add(name)
        if partition.get("Default") in (True, "YES", "yes", "Yes"):
            defaults.append(str(name))
    if len(defaults) > 1:
        problems.append(Problem("config_partitions", "at most one partition may be Default (got %s)"
                                % ", ".join(defaults)))
    return problems


# The image's own accounts (Debian's base-passwd, the daemons'): the pods read the site's users after them
# (nsswitch "files extrausers"), so a site user with one of these names or ids would not be the one seen.
_RESERVED_USERS = ("root", "slurm", "munge", "slurmrestd", "sshd", "mysql", "nobody", "daemon", "bin", "sys",
                   "sync", "games", "man", "lp", "mail", "news", "uucp", "proxy", "www-data", "backup", "list",
                   "irc", "_apt", "messagebus")
_RESERVED_IDS = {64030: "slurm", 64031: "munge", 64032: "slurmrestd", 65534: "nobody/nogroup"}


def _user_rules(values):
    problems, names, uids = [], set(), set()
    users = values.get("config_users")
    for index, user in enumerate(users if isinstance(users, list) else []):
        if not isinstance(user, dict):
            continue
        where = "config_users[%d] (%s)" % (index, user.get("name", "?"))
        name, uid = _scalar(user.get("name")), _scalar(user.get("uid"))
        if name in _RESERVED_USERS:
            problems.append(Problem(where + ".name", "must not be one of the image's own users (%s)"
                                    % ", ".join(_RESERVED_USERS)))
        for field in ("uid", "gid"):
            value = _scalar(user.get(field))
            if value in _RESERVED_IDS:
                problems.append(Problem("%s.%s" % (where, field), "%s is the image's %s id (choose another)"
                                        % (value, _RESERVED_IDS[value])))
        if name is not None and name in names:
            problems.append(Problem(where + ".name", "is used twice"))
        if uid is not None and uid in uids:
            problems.append(Problem(where + ".uid", "%s is used twice" % uid))
        names.add(name)
        uids.add(uid)
    return problems


# where slurm_accounting's messages point (its option) -> the variable it came from
_ACCOUNTING_VARIABLES = (("qos[", "config_qos["), ("accounts[", "config_accounts["), ("users[", "config_users["))


def _accounting_rules(values):
    """The accounting variables planned against a new database with slurm_accounting's own planner:
    values, references (QoS, parents, accounts), TRES and cycles, before anything is deployed."""
    names = ("config_users", "config_qos", "config_accounts")
    if not all(isinstance(values.get(name, []), list) for name in names) or \
            not all(isinstance(item, dict) and item.get("name") for name in names for item in values.get(name, [])):
        return []   # the field rules report it
    default_account = values.get("config_default_account", "users")
    conf = _effective_conf(values, "config_slurm_conf_default", "config_slurm_conf")
    if conf.get("AccountingStorageType", "accounting_storage/slurmdbd") != "accounting_storage/slurmdbd":
        for name in ("config_qos", "config_accounts"):
            if values.get(name):
                return [Problem(name, "needs slurmdbd accounting (config_slurm_conf.AccountingStorageType is %s)"
                                % conf["AccountingStorageType"])]
        return []
    extra_tres = str(conf.get("AccountingStorageTRES") or "").split(",")
    try:
        arguments = collection_input(values.get("config_qos"), values.get("config_accounts"),
                                     values.get("config_users"), default_account)
        accounting_plan(FreshState(str(values.get("cluster_name") or "cluster"), extra_tres), **arguments)
    except (TypeError, ValueError, AttributeError) as error:
        return [Problem("config_qos, config_accounts or config_users", "could not be read (%s)" % error)]
    except SlurmInputError as error:
        where, _sep, text = str(error).partition(": ")
        for option, variable in _ACCOUNTING_VARIABLES:
            if where.startswith(option):
                where = variable + where[len(option):]
        text = text.replace("(list it in qos)", "(list it in config_qos)").replace(
            "(list it in accounts)", "(list it in config_accounts)")
        return [Problem(where, text or where)]
    return []


def _cores(request):
    if re.fullmatch(r"[0-9]+m", request):
        return int(request[:-1]) / 1000
    if re.fullmatch(r"[0-9]+([.][0-9]{1,3})?", request):
        return float(request)
    return None


def _group_rules(values):
    problems = []
    groups, defaults = values.get("powersave_groups"), values.get("powersave_group_defaults") or {}
    if not isinstance(groups, list) or not isinstance(defaults, dict):
        return problems
    names, partitions = set(), set()
    for index, raw in enumerate(groups):
        if not isinstance(raw, dict):
            continue
        group = dict(defaults)
        group.update(raw)
        where = "powersave_groups[%d] (%s)" % (index, group.get("name", "?"))
        request, cpus = group.get("cpu_request"), group.get("cpus")
        if isinstance(request, str) and request and isinstance(cpus, int) and _cores(request) is not None \
                and not 0 < _cores(request) <= cpus:
            problems.append(Problem(where + ".cpu_request", "must be above 0 and no larger than cpus (%d)" % cpus))
        grace, timeout = group.get("suspend_grace_period"), group.get("suspend_timeout")
        if isinstance(grace, int) and isinstance(timeout, int) and grace >= timeout:
            problems.append(Problem(where + ".suspend_grace_period", "must be shorter than suspend_timeout (%d)"
                                    % timeout))
        name = _scalar(group.get("name"))
        if name is not None and name in names:
            problems.append(Problem(where + ".name", "must be unique among powersave_groups"))
        names.add(name)
        partition = _scalar(group.get("partition")) or name
        if partition is not None and partition in partitions:
            problems.append(Problem(where + ".partition", "must be unique among powersave_groups"))
        partitions.add(partition)
    return problems


# the override dicts of whole Slurm files, and the file each one is written to
SLURM_FILE_VARIABLES = {"config_slurm_conf_default": "slurm.conf", "config_slurm_conf": "slurm.conf",
                        "powersave_slurm_conf_extra": "slurm.conf", "config_cgroup_conf_default": "cgroup.conf",
                        "config_cgroup_conf": "cgroup.conf", "slurmdbd_conf_default": "slurmdbd.conf",
                        "slurmdbd_conf": "slurmdbd.conf"}


def _gres_conf_keys(content):
    """(line number, key, value) of each key=value of a gres.conf text."""
    for number, line in enumerate(str(content).split("\n"), 1):
        for token in line.split("#", 1)[0].split():
            key, sep, item = token.partition("=")
            if sep:
                yield number, key, item


def slurm_parameter_problems(values, majors, strict):
    """The override values Slurm's parameter table (_slurm_parameters) refuses for ``majors``. ``strict``: the
    cluster runs each of them (the images' majors, once read), and what any refuses is a problem; else it runs
    one of them (before the images are read: the supported majors), and only what all refuse is."""
    problems = []
    newer_allowed = values.get("slurmctld_allow_newer_major") is True
    # (where a problem of the value is named, where one of the key is, file, key, value)
    items = [("%s[%r]" % (name, key), "%s key %r" % (name, key), file, key, value)
             for name, file in SLURM_FILE_VARIABLES.items() if isinstance(values.get(name), dict)
             for key, value in values[name].items()]
    extra = values.get("config_extra_files")
    if isinstance(extra, dict) and isinstance(extra.get("gres.conf"), str):
        items += [("config_extra_files['gres.conf'] line %d %s" % (number, key),) * 2 + ("gres.conf", key, value)
                  for number, key, value in _gres_conf_keys(extra["gres.conf"])]
    for value_where, key_where, file, key, value in items:
        if not isinstance(key, str) or not re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", key):
            continue  # the grammar rule of the variable names it
        for part, text in _slurm_parameters.problems(file, key, value, majors, strict):
            if part == "key" and newer_allowed and not _slurm_parameters.known(file, key):
                continue  # a newer Slurm than the table knows may have it: its daemons judge
            problems.append(Problem(value_where if part == "value" else key_where, text))
    # the rules between keys, over the file as written: the defaults, the power-save keys, the overrides
    conf = {}
    for name in ("config_slurm_conf_default", "powersave_slurm_conf_extra", "config_slurm_conf"):
        if isinstance(values.get(name), dict):
            conf.update(values[name])
    if "config_slurm_conf" in values:
        overridden = {str(key).lower() for key in values["config_slurm_conf"] or {}} \
            if isinstance(values["config_slurm_conf"], dict) else set()
        for keys, text in _slurm_parameters.slurm_conf_relations(conf):
            # named after the key the override sets (the one to change), else the first
            key = next((key for key in keys if key.lower() in overridden), keys[0])
            problems.append(Problem("config_slurm_conf['%s']" % key, text))
    return problems


def check(values, rules=None):
    """Every rule of every variable present in ``values``, then the rules across variables."""
    rules = RULES if rules is None else rules
    problems = []
    for name, value in values.items():
        rule = rules.get(name)
        if rule is None:
            continue
        checker = Checker(secret=name in SECRET_VARIABLES)
        checker.run(name, rule, value)
        problems.extend(checker.problems)
    # a key whose grammar failed is not judged by the parameter table too: one problem per rule
    named = [problem.where for problem in problems]
    parameters = [problem for problem in slurm_parameter_problems(values, list(SUPPORTED_MAJORS), strict=False)
                  if not any(_key_path(where).startswith(_key_path(problem.where)) for where in named)]
    return problems + _cross_rules(values) + parameters


def _key_path(where):
    """"config_slurm_conf['A']" of "config_slurm_conf key 'A'" (a grammar problem of key or value names one)."""
    found = re.fullmatch(r"(\w+) key (.+)", where)
    return "%s[%s]" % found.groups() if found else where


def unknown_variables(names, known):
    """Names that look like ours (a role prefix) but are no variable of any role, with a suggestion."""
    problems = []
    for name in sorted(names):
        if not name.startswith(PREFIXES) or name in known or name in ROLE_OUTPUTS or name in AZIMUTH_VARIABLES:
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
        hint = "did you mean %s? " % close[0] if close else ""
        problems.append(Problem(name, "is not a variable of any hpc.slurm_k8s role (%sit would be ignored; "
                                "see the roles' meta/argument_specs.yml)" % hint))
    return problems
