# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Run Slurm's own commands (scontrol, squeue) as argument lists, never through a shell.

Private to hpc.slurm_k8s (leading underscore): other collections must not import it.
Every command that fails raises SlurmCommandError carrying argv, rc, stdout and stderr; only a
module's main() turns errors into fail_json.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# Slurm prints some failures on stderr with rc 0: treat those as failures too, a command we cannot
# trust must never be read as an empty answer. Every command: an "error:" or "fatal:" line. The
# hostlist commands also print a bare "Invalid hostlist" with rc 0 (`scontrol show hostnames 'n[2-1]'`),
# a word other commands may print on stderr about something else (a warning that names an invalid
# option of slurm.conf, say) without failing.
_STDERR_FAILURE = re.compile(r"(^|\s)(error|fatal):", re.IGNORECASE)
_HOSTLIST_STDERR_FAILURE = re.compile(r"(^|\s)(error|fatal):|\bInvalid\b", re.IGNORECASE)

SLURM_COMMON_ARGUMENT_SPEC = dict(
    slurm_conf=dict(type="path"),
)


class SlurmError(Exception):
    """Base class of every error raised by hpc.slurm_k8s's Slurm helpers.

    `details` holds extra keys for fail_json (what is known of the state when the error happened).
    """

    def __init__(self, message, **details):
        super(SlurmError, self).__init__(message)
        self.details = details

    def result(self):
        return dict(self.details)


class SlurmCommandError(SlurmError):
    """A Slurm command failed (non-zero exit, or an error it reported on stderr)."""

    def __init__(self, argv, rc, stdout, stderr):
        self.argv = list(argv)
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        detail = (stderr or stdout or "").strip() or "no output"
        super(SlurmCommandError, self).__init__(
            "%s failed (rc=%s): %s" % (" ".join(self.argv), rc, detail))

    def result(self):
        result = dict(cmd=self.argv, rc=self.rc, stdout=self.stdout, stderr=self.stderr)
        result.update(self.details)
        return result


class SlurmInputError(SlurmError):
    """The module input does not fit the cluster (unknown nodes, an invalid hostlist, ...)."""


class SlurmTimeoutError(SlurmError):
    """A wait ran out of time; the message names what is still in the way."""


class SlurmRunner:
    """Builds and runs Slurm commands for one cluster (one SLURM_CONF)."""

    def __init__(self, module, slurm_conf=None):
        self._module = module
        self._environ = {"SLURM_CONF": slurm_conf} if slurm_conf else {}
        self._paths = {}
        self.commands = []

    def _binary(self, name):
        if name not in self._paths:
            path = self._module.get_bin_path(name)
            if not path:
                raise SlurmError(
                    "%s was not found in PATH: these modules run where the Slurm client commands are "
                    "installed (in Kubernetes: inside the slurmctld pod)" % name)
            self._paths[name] = path
        return self._paths[name]

    def run(self, binary, args, stderr_failure=_STDERR_FAILURE, data=None):
        """Run `binary args...` (with `data` on its standard input) and return its stdout; raise
        SlurmCommandError on any failure (a non-zero exit, or stderr matching `stderr_failure`)."""
        argv = [self._binary(binary)] + [str(arg) for arg in args]
        self.commands.append(argv)
        extra = {} if data is None else dict(data=data, binary_data=False)
        rc, stdout, stderr = self._module.run_command(argv, check_rc=False, environ_update=self._environ, **extra)
        if rc != 0 or stderr_failure.search(stderr or ""):
            raise SlurmCommandError(argv, rc, stdout, stderr)
        return stdout

    # -- scontrol ---------------------------------------------------------------------------
    def show_nodes(self):
        return self.run("scontrol", ["show", "node", "--oneliner"])

    def expand_hostlists(self, expressions):
        return self.run("scontrol", ["show", "hostnames", ",".join(expressions)], _HOSTLIST_STDERR_FAILURE)

    def compress_hostlist(self, names):
        return self.run("scontrol", ["show", "hostlist", ",".join(names)], _HOSTLIST_STDERR_FAILURE).strip()

    def update_nodes(self, hostlist, state, reason=None):
        args = ["update", "nodename=%s" % hostlist, "state=%s" % state]
        if reason is not None:
            args.append("reason=%s" % reason)
        return self.run("scontrol", args)

    # -- squeue -----------------------------------------------------------------------------
    def squeue(self, fields, partitions=None, users=None, nodes=None, job_ids=None):
        """All jobs Slurm still knows (`-t all`), one line per job, fields joined by '|'.

        State filtering is done by the caller: Slurm 22.05 and 24.11 disagree on which short state
        names `-t` accepts, and `-t all` is the only spelling both read the same way.
        """
        args = ["--noheader", "--array", "--states=all", "--format=%s" % "|".join(fields)]
        if partitions:
            args.append("--partition=%s" % ",".join(partitions))
        if users:
            args.append("--user=%s" % ",".join(users))
        if nodes:
            args.append("--nodelist=%s" % nodes)
        if job_ids:
            args.append("--jobs=%s" % ",".join(job_ids))
        return self.run("squeue", args)
