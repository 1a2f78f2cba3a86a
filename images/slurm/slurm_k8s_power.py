# hpc.slurm_k8s: Slurm power saving on Kubernetes (installed as /usr/local/lib/hpc-slurm-k8s/slurm_k8s_power.py,
# run by the powersave role's wrappers as `/usr/bin/python3 -I slurm_k8s_power.py ...`: Slurm runs its
# programs with an empty environment, so the wrappers name the interpreter by its absolute path).
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Create and delete the pods of Slurm power-save ("burst") nodes through the Kubernetes API.

    /usr/bin/python3 -I slurm_k8s_power.py resume|suspend|resume-fail|prolog HOSTLIST [--config FILE]

Slurm runs ResumeProgram, SuspendProgram and ResumeFailProgram with the hostlist as the only
argument, so the role points them at wrappers that add the subcommand. One pod per node, named
after the node: the API server guarantees there is never a second one.

- resume:      read SLURM_RESUME_FILE first (it vanishes when slurmctld stops); per node GET the pod:
               Pending/Running: nothing to do; Failed/Succeeded: delete it, then create a new one;
               Terminating: wait (briefly) until it is gone, then create; absent: create (POST).
               A 409 on create means someone else created it meanwhile: look again.
- suspend:     DELETE each pod with the group's grace period (shorter than SuspendTimeout); a
               missing pod (404) is success. Does not wait for pods to go.
- resume-fail: delete the pods of nodes that did not come up by ResumeTimeout, then
               `scontrol update nodename=... state=resume` (DOWN+POWERED_DOWN -> IDLE+POWERED_DOWN).
- prolog:      PrologSlurmctld, with the job's nodes (SLURM_JOB_NODELIST; its wrapper calls this only
               when they name a burst node): wait until every burst node of the job has registered
               (neither POWERED_DOWN nor POWERING_UP in `scontrol show node`), then exit 0. slurmctld
               launches a batch job whose nodes were powered up at its periodic job check, every 30 s,
               unless a PrologSlurmctld ends once they are ready: then at once. Always exits 0 (a
               node that goes DOWN, or is not up by its group's ResumeTimeout, is left to Slurm's
               own handling: ResumeTimeout, requeue), so it never fails a job itself.

Every call may overlap with others and repeat after a slurmctld restart: each step is idempotent.
Only the Python standard library is used. The configuration is a JSON file rendered by the
hpc.slurm_k8s.powersave role (default /etc/slurm-k8s/power/config.json); the service account token
is read again for every request (kubelet rotates projected tokens). Logs go to the file named in the
configuration (Slurm discards the program's stdout and stderr).
"""

import argparse
import concurrent.futures
import copy
import json
import logging
import logging.handlers
import os
import re
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

DESCRIPTION = __doc__
PROG = "slurm-k8s-power"
DEFAULT_CONFIG = "/etc/slurm-k8s/power/config.json"
COMMANDS = ("resume", "suspend", "resume-fail", "prolog")
LOG = logging.getLogger(PROG)

EXIT_OK = 0
EXIT_NODE_FAILED = 1
EXIT_CONFIG = 2

LABEL_NODE = "hpc.slurm-k8s/slurm-node"
LABEL_GROUP = "hpc.slurm-k8s/burst-group"
ANNOTATION_JOBS = "hpc.slurm-k8s/resume-jobs"


# ------------------------------------------------------------------------------------------ errors
class PowerError(Exception):
    """Base class of every error this program reports."""


class ConfigError(PowerError):
    """The configuration file, the pod template or the token cannot be used."""


class SlurmCommandError(PowerError):
    """A Slurm command (scontrol) failed."""


class ApiError(PowerError):
    """The Kubernetes API answered with an unexpected status, or could not be reached (status 0)."""

    def __init__(self, method: str, path: str, status: int, message: str) -> None:
        super().__init__("%s %s: %s %s" % (method, path, status or "no answer", message))
        self.method = method
        self.path = path
        self.status = status
        self.message = message


class NodeError(PowerError):
    """One node could not be handled; the others go on."""


# ------------------------------------------------------------------------------------------ config
class Group:
    """A burst node group: nodes PREFIX0 .. PREFIX<count-1> and the pod template they are made from."""

    def __init__(self, data: dict) -> None:
        try:
            self.name = str(data["name"])
            self.prefix = str(data["prefix"])
            self.count = int(data["count"])
            self.pod_template = str(data["pod_template"])
            self.suspend_grace_period = int(data.get("suspend_grace_period", 30))
            self.resume_timeout = float(data.get("resume_timeout", 600))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError("invalid group %r: %s" % (data, exc)) from exc
        self._pattern = re.compile(re.escape(self.prefix) + r"(0|[1-9][0-9]*)")

    def owns(self, node: str) -> bool:
        match = self._pattern.fullmatch(node)
        return bool(match) and int(match.group(1)) < self.count

    def load_template(self) -> dict:
        try:
            with open(self.pod_template, encoding="utf-8") as handle:
                pod = json.load(handle)
        except (OSError, ValueError) as exc:
            raise ConfigError("pod template %s of group %s: %s" % (self.pod_template, self.name, exc)) from exc
        if not isinstance(pod, dict) or pod.get("kind") != "Pod" or not isinstance(pod.get("spec"), dict):
            raise ConfigError("pod template %s of group %s is not a Pod manifest" % (self.pod_template, self.name))
        return pod


class Config:
    """The JSON file rendered by the powersave role."""

    def __init__(self, data: dict) -> None:
        try:
            self.api_server = str(data["api_server"]).rstrip("/")
            self.namespace = str(data["namespace"])
            self.token_file = str(data["token_file"])
            self.ca_file = str(data.get("ca_file") or "")
            self.scontrol = str(data.get("scontrol", "/usr/bin/scontrol"))
            # the SLURM_CONF of every scontrol call (Slurm runs PrologSlurmctld without one); "" keeps the caller's
            self.slurm_conf = str(data.get("slurm_conf") or "")
            self.log_file = str(data.get("log_file") or "")
            self.owner_statefulset = str(data.get("owner_statefulset") or "")
            self.request_timeout = float(data.get("request_timeout", 10))
            self.terminating_wait = float(data.get("terminating_wait", 30))
            self.poll_interval = float(data.get("poll_interval", 1))
            self.prolog_poll_interval = float(data.get("prolog_poll_interval", 0.5))
            self.parallel = max(1, int(data.get("parallel", 8)))
            self.groups = [Group(item) for item in data["groups"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError("invalid configuration: %s" % exc) from exc
        if urllib.parse.urlsplit(self.api_server).scheme not in ("http", "https"):
            raise ConfigError("api_server must be an http(s) URL, got %r" % self.api_server)
        for path in (self.scontrol, self.token_file):
            if not os.path.isabs(path):
                raise ConfigError("%s must be an absolute path (Slurm gives this program no PATH)" % path)

    @classmethod
    def load(cls, path: str) -> "Config":
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError) as exc:
            raise ConfigError("cannot read configuration %s: %s" % (path, exc)) from exc
        if not isinstance(data, dict):
            raise ConfigError("configuration %s is not a JSON object" % path)
        return cls(data)

    def group_of(self, node: str) -> Group:
        for group in self.groups:
            if group.owns(node):
                return group
        raise NodeError("%s is not a burst node of any group (%s): refusing to touch it"
                        % (node, ", ".join("%s0..%d" % (g.prefix, g.count - 1) for g in self.groups)))


def setup_logging(log_file: str, command: str) -> None:
    """Log to the configured file (Slurm throws stdout/stderr away), else to stderr."""
    fmt = logging.Formatter("%(asctime)s " + PROG + "[%(process)d] " + command + " %(levelname)s %(message)s")
    handler: logging.Handler
    try:
        handler = logging.handlers.RotatingFileHandler(log_file, maxBytes=10 << 20, backupCount=2) \
            if log_file else logging.StreamHandler(sys.stderr)
    except OSError as exc:
        handler = logging.StreamHandler(sys.stderr)
        print("%s: cannot open log file %s (%s): logging to stderr" % (PROG, log_file, exc), file=sys.stderr)
    handler.setFormatter(fmt)
    LOG.handlers[:] = [handler]
    LOG.setLevel(logging.INFO)
    LOG.propagate = False


# ------------------------------------------------------------------------------------- Kubernetes
class KubeClient:
    """Just enough of the Kubernetes REST API: JSON requests with the service account token."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._ssl = None
        if config.api_server.startswith("https:"):
            try:
                self._ssl = ssl.create_default_context(cafile=config.ca_file or None)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError("CA file %s: %s" % (config.ca_file, exc)) from exc

    def _token(self) -> str:
        # read on every request: kubelet rotates projected tokens in place
        try:
            with open(self.config.token_file, encoding="utf-8") as handle:
                token = handle.read().strip()
        except OSError as exc:
            raise ConfigError("cannot read the service account token %s: %s" % (self.config.token_file, exc)) from exc
        if not token:
            raise ConfigError("service account token %s is empty" % self.config.token_file)
        return token

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        """Send one request; return (status, decoded body). A 401 is retried once with a fresh token."""
        for attempt in (1, 2):
            status, answer = self._send(method, path, body)
            if status != 401 or attempt == 2:
                return status, answer
            LOG.warning("%s %s: 401 Unauthorized, reading the token again and retrying", method, path)
        raise AssertionError("unreachable")

    def _send(self, method: str, path: str, body: dict | None) -> tuple[int, dict]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.config.api_server + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + self._token())
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.config.request_timeout, context=self._ssl) as resp:
                return resp.status, _decode(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, _decode(exc.read())
        except (urllib.error.URLError, OSError) as exc:
            raise ApiError(method, path, 0, str(getattr(exc, "reason", exc))) from exc

    def pod_path(self, name: str = "") -> str:
        base = "/api/v1/namespaces/%s/pods" % urllib.parse.quote(self.config.namespace)
        return base + ("/" + urllib.parse.quote(name) if name else "")

    def get_pod(self, name: str) -> dict | None:
        status, pod = self.request("GET", self.pod_path(name))
        if status == 404:
            return None
        _expect("GET", self.pod_path(name), status, pod, 200)
        return pod

    def create_pod(self, pod: dict) -> bool:
        """POST the pod; False if it already exists (409)."""
        status, answer = self.request("POST", self.pod_path(), pod)
        if status == 409:
            return False
        _expect("POST", self.pod_path(), status, answer, 200, 201, 202)
        return True

    def delete_pod(self, name: str, grace_period: int, uid: str = "") -> bool:
        """DELETE the pod (only that incarnation when uid is given); False if it was already gone."""
        options: dict = {"apiVersion": "v1", "kind": "DeleteOptions",
                         "gracePeriodSeconds": max(0, int(grace_period)), "propagationPolicy": "Background"}
        if uid:
            options["preconditions"] = {"uid": uid}
        status, answer = self.request("DELETE", self.pod_path(name), options)
        if status == 404:
            return False
        if status == 409 and uid:
            return False  # uid precondition failed: that pod is gone and another one replaced it
        _expect("DELETE", self.pod_path(name), status, answer, 200, 202)
        return True

    def get_statefulset_uid(self, name: str) -> str:
        path = "/apis/apps/v1/namespaces/%s/statefulsets/%s" % (
            urllib.parse.quote(self.config.namespace), urllib.parse.quote(name))
        status, sts = self.request("GET", path)
        _expect("GET", path, status, sts, 200)
        uid = sts.get("metadata", {}).get("uid")
        if not uid:
            raise ApiError("GET", path, status, "StatefulSet has no metadata.uid")
        return uid


def _decode(raw: bytes) -> dict:
    try:
        value = json.loads(raw.decode("utf-8", "replace")) if raw else {}
    except ValueError:
        return {"message": raw[:200].decode("utf-8", "replace")}
    return value if isinstance(value, dict) else {"value": value}


def _expect(method: str, path: str, status: int, body: dict, *ok: int) -> None:
    if status not in ok:
        raise ApiError(method, path, status, "%s %s" % (body.get("reason", ""), body.get("message", "")))


# ------------------------------------------------------------------------------------------ Slurm
def _scontrol(argv: list[str], timeout: float) -> str:
    """Run one scontrol call (argument list, no shell) and return its output; any failure is a SlurmCommandError
    naming the command."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SlurmCommandError("%s: %s" % (" ".join(argv), exc)) from exc
    if proc.returncode != 0:
        raise SlurmCommandError("%s: exit %d: %s" % (" ".join(argv), proc.returncode, proc.stderr.strip()))
    return proc.stdout


def expand_hostlist(scontrol: str, hostlist: str) -> list[str]:
    """`scontrol show hostnames HOSTLIST`."""
    nodes = _scontrol([scontrol, "show", "hostnames", hostlist], timeout=30).split()
    if not nodes:
        raise SlurmCommandError("hostlist %r expands to no node" % hostlist)
    return nodes


# flags of `scontrol show node` that keep slurmctld from launching a job there (select plugin's job_ready)
NOT_READY_FLAGS = frozenset(("POWERED_DOWN", "POWERING_UP", "POWER_DOWN", "POWER_UP"))
# base states after which the node will not come up for this job (Slurm requeues it)
GIVEN_UP_STATES = frozenset(("DOWN", "FUTURE", "UNKNOWN"))


def node_states(scontrol: str, nodes: list[str]) -> dict[str, tuple[str, frozenset]]:
    """node -> (base state, flags) from one `scontrol show node --oneliner NODES`."""
    states = {}
    for line in _scontrol([scontrol, "show", "node", "--oneliner", ",".join(nodes)], timeout=30).splitlines():
        name = re.search(r"(?:^|\s)NodeName=(\S+)", line)
        state = re.search(r"(?:^|\s)State=(\S+)", line)
        if name and state:
            # State=BASE[+FLAG...], each part possibly with sinfo-style suffixes (*, ~, #, ...)
            parts = [part.rstrip("*~#!%$@^-") for part in state.group(1).upper().split("+")]
            states[name.group(1)] = (parts[0], frozenset(parts[1:]))
    return states


def resume_nodes_in_slurm(scontrol: str, nodes: list[str]) -> None:
    """DOWN+POWERED_DOWN -> IDLE+POWERED_DOWN (idle~), so that Slurm may power the nodes up again."""
    _scontrol([scontrol, "update", "nodename=" + ",".join(nodes), "state=resume"], timeout=60)


# --------------------------------------------------------------------------------------- commands
class PowerProgram:
    """The three operations; each node is handled on its own, so one failure does not stop the rest."""

    def __init__(self, config: Config, client: KubeClient) -> None:
        self.config = config
        self.client = client
        self._owner: list[dict] | None = None
        self.node_jobs: dict[str, list[int]] = {}

    # -- resume
    def owner_references(self) -> list[dict]:
        """The slurmctld StatefulSet as (non-controlling) owner: deleting it removes the burst pods."""
        if self._owner is None:
            name = self.config.owner_statefulset
            self._owner = [] if not name else [{
                "apiVersion": "apps/v1", "kind": "StatefulSet", "name": name,
                "uid": self.client.get_statefulset_uid(name), "controller": False,
            }]
        return self._owner

    def build_pod(self, node: str, group: Group) -> dict:
        pod = copy.deepcopy(group.load_template())
        meta = pod.setdefault("metadata", {})
        meta["name"] = node
        meta["namespace"] = self.config.namespace
        meta.pop("generateName", None)
        meta.setdefault("labels", {}).update({LABEL_NODE: node, LABEL_GROUP: group.name})
        jobs = self.node_jobs.get(node)
        if jobs:
            meta.setdefault("annotations", {})[ANNOTATION_JOBS] = ",".join(str(j) for j in sorted(jobs))
        owners = self.owner_references()
        if owners:
            meta["ownerReferences"] = owners
        return pod

    def wait_gone(self, node: str, uid: str) -> None:
        deadline = time.monotonic() + self.config.terminating_wait
        while time.monotonic() < deadline:
            pod = self.client.get_pod(node)
            if pod is None or pod.get("metadata", {}).get("uid") != uid:
                return
            time.sleep(self.config.poll_interval)
        raise NodeError("pod %s still terminating after %.0f s; Slurm will retry after ResumeTimeout"
                        % (node, self.config.terminating_wait))

    def resume_node(self, node: str) -> str:
        group = self.config.group_of(node)
        for _attempt in range(3):
            pod = self.client.get_pod(node)
            if pod is not None:
                meta, phase = pod.get("metadata", {}), pod.get("status", {}).get("phase", "Pending")
                uid = meta.get("uid", "")
                if meta.get("deletionTimestamp"):
                    LOG.info("%s: pod is terminating (uid %s); waiting up to %.0f s for it to go",
                             node, uid, self.config.terminating_wait)
                    self.wait_gone(node, uid)
                elif phase in ("Pending", "Running"):
                    return "pod already %s, nothing to do" % phase
                elif phase in ("Failed", "Succeeded"):
                    LOG.info("%s: pod has ended (%s); deleting it before creating a new one", node, phase)
                    self.client.delete_pod(node, 0, uid)
                    self.wait_gone(node, uid)
                else:
                    return "pod in phase %s left alone" % phase
            if self.client.create_pod(self.build_pod(node, group)):
                return "pod created (group %s)" % group.name
            LOG.info("%s: pod created by someone else meanwhile (409); looking again", node)
        raise NodeError("pod %s: gave up after 3 rounds of conflicts" % node)

    # -- suspend / resume-fail
    def suspend_node(self, node: str) -> str:
        group = self.config.group_of(node)
        if self.client.delete_pod(node, group.suspend_grace_period):
            return "pod deleted (grace period %d s)" % group.suspend_grace_period
        return "no pod (already deleted)"

    def fail_node(self, node: str) -> str:
        return self.suspend_node(node)

    # -- driver
    def run(self, command: str, nodes: list[str]) -> int:
        action = {"resume": self.resume_node, "suspend": self.suspend_node, "resume-fail": self.fail_node}[command]
        if command == "resume":
            self.owner_references()  # once, before the threads; an error fails the whole call
        failed = []
        workers = min(self.config.parallel, len(nodes))
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            futures = {pool.submit(action, node): node for node in nodes}
            for future in concurrent.futures.as_completed(futures):
                node = futures[future]
                try:
                    LOG.info("%s: %s", node, future.result())
                except PowerError as exc:
                    failed.append(node)
                    LOG.error("%s: %s", node, exc)
        if command == "resume-fail":
            failed += self._return_to_service(sorted(set(nodes) - set(failed)))
        if failed:
            LOG.error("%s failed for %d of %d node(s): %s", command, len(failed), len(nodes), ",".join(sorted(failed)))
            return EXIT_NODE_FAILED
        LOG.info("%s done for %d node(s)", command, len(nodes))
        return EXIT_OK

    def _return_to_service(self, nodes: list[str]) -> list[str]:
        if not nodes:
            return []
        try:
            resume_nodes_in_slurm(self.config.scontrol, nodes)
        except SlurmCommandError as exc:
            LOG.error("returning nodes to service: %s", exc)
            return nodes
        LOG.info("%s: state=resume (now powered down and available again)", ",".join(nodes))
        return []


def wait_until_registered(config: Config, nodes: list[str], clock=time.monotonic, sleep=time.sleep) -> str:
    """PrologSlurmctld: return once every burst node among `nodes` has registered (or will not, for now)."""
    burst = {}
    for node in nodes:
        for group in config.groups:
            if group.owns(node):
                burst[node] = group
    if not burst:
        return "no burst node"
    deadline = clock() + max(group.resume_timeout for group in burst.values())
    started = clock()
    while True:
        states = node_states(config.scontrol, sorted(burst))
        waiting = sorted(node for node in burst if node not in states or states[node][1] & NOT_READY_FLAGS)
        if not waiting:
            return "every burst node registered after %.1f s" % (clock() - started)
        down = [node for node in waiting if node in states and states[node][0] in GIVEN_UP_STATES]
        if down:
            return "%s %s: left to Slurm (ResumeTimeout, requeue)" % (",".join(down), states[down[0]][0])
        if clock() > deadline:
            return "%s not registered within its ResumeTimeout: left to Slurm" % ",".join(waiting)
        sleep(config.prolog_poll_interval)


def map_jobs_to_nodes(scontrol: str, jobs_by_hostlist: dict[str, list[int]]) -> dict[str, list[int]]:
    node_jobs: dict[str, list[int]] = {}
    for hostlist, jobs in jobs_by_hostlist.items():
        if not hostlist:
            continue
        try:
            for node in expand_hostlist(scontrol, hostlist):
                node_jobs.setdefault(node, []).extend(jobs)
        except SlurmCommandError as exc:
            LOG.warning("resume file: %s", exc)
    return node_jobs


# ------------------------------------------------------------------------------------------- main
def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=COMMANDS)
    parser.add_argument("hostlist", help="Slurm hostlist, e.g. slurmd-burst-[0-3,7]")
    parser.add_argument("extra", nargs="*", help=argparse.SUPPRESS)  # older Slurm passes features
    parser.add_argument("--config", default=os.environ.get("SLURM_K8S_POWER_CONFIG", DEFAULT_CONFIG))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # the resume file disappears when slurmctld stops: read it before anything slow
    resume_file = os.environ.get("SLURM_RESUME_FILE") if args.command == "resume" else None
    resume_data = None
    if resume_file:
        try:
            with open(resume_file, encoding="utf-8") as handle:
                resume_data = handle.read()
        except OSError:
            resume_data = None
    try:
        config = Config.load(args.config)
    except ConfigError as exc:
        setup_logging("", args.command)
        LOG.error("%s", exc)
        return EXIT_CONFIG
    setup_logging(config.log_file, args.command)
    if config.slurm_conf:
        os.environ["SLURM_CONF"] = config.slurm_conf   # for every scontrol call
    started = time.monotonic()
    LOG.info("called for %s", args.hostlist)
    if args.command == "prolog":
        return prolog(config, args.hostlist, started)
    try:
        client = KubeClient(config)
        nodes = expand_hostlist(config.scontrol, args.hostlist)
        program = PowerProgram(config, client)
        if resume_file:
            program.node_jobs = map_jobs_to_nodes(config.scontrol, _parse_resume_text(resume_file, resume_data))
        code = program.run(args.command, nodes)
    except ConfigError as exc:
        LOG.error("%s", exc)
        return EXIT_CONFIG
    except PowerError as exc:
        LOG.error("%s", exc)
        return EXIT_NODE_FAILED
    LOG.info("finished in %.2f s (exit %d)", time.monotonic() - started, code)
    return code


def prolog(config: Config, hostlist: str, started: float) -> int:
    """PrologSlurmctld: always exit 0, whatever happens (a failing PrologSlurmctld would requeue the job)."""
    job = os.environ.get("SLURM_JOB_ID", "?")
    try:
        outcome = wait_until_registered(config, expand_hostlist(config.scontrol, hostlist))
    except PowerError as exc:
        outcome = "%s: launch left to slurmctld's periodic job check" % exc
        LOG.warning("job %s: %s", job, outcome)
    else:
        LOG.info("job %s: %s", job, outcome)
    LOG.info("finished in %.2f s (exit 0)", time.monotonic() - started)
    return EXIT_OK


def _parse_resume_text(path: str, text: str | None) -> dict[str, list[int]]:
    if text is None:
        LOG.warning("SLURM_RESUME_FILE %s could not be read (slurmctld stopped?): no job annotations", path)
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        LOG.warning("SLURM_RESUME_FILE %s: not JSON: %s", path, exc)
        return {}
    # 24.11: all_nodes_resume, jobs[].nodes_resume (+ nodes_alloc); 22.05: all_nodes, jobs[].nodes
    jobs: dict[str, list[int]] = {}
    entries = [job for job in data.get("jobs") or [] if isinstance(job, dict)]
    for job in entries:
        hostlist = job.get("nodes_resume") or job.get("nodes") or job.get("nodes_alloc") or ""
        jobs.setdefault(str(hostlist), []).append(int(job.get("job_id", 0)))
    LOG.info("resume file: nodes=%s jobs=%s", data.get("all_nodes_resume") or data.get("all_nodes") or "",
             " ".join("%s:%s" % (job, hostlist) for hostlist, ids in jobs.items() for job in ids))
    return jobs


if __name__ == "__main__":
    sys.exit(main())
