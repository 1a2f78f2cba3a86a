# -*- coding: utf-8 -*-
# Copyright: hpc.slurm_k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small fake Kubernetes API server (plain HTTP on 127.0.0.1) for slurm-k8s-power's tests.

It implements the four calls the program makes (pods: GET, POST, DELETE; StatefulSet: GET) with the
API server's semantics that matter here: one pod per name (409 AlreadyExists), 404 NotFound, uid
preconditions on DELETE, bearer-token authentication (401 for any token but the current one), and
pods that stay "Terminating" for a while after a graceful DELETE. It records every request.

Hooks let a test play the kubelet: ``on_create(pod)`` runs after a pod is stored (the integration
test starts a real slurmd there and sets the phase), ``on_delete(pod, grace)`` runs when a pod is
deleted and returns the seconds it stays Terminating (the integration test stops slurmd there).
"""

from __future__ import annotations

import copy
import datetime
import json
import re
import ssl
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

POD_PATH = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods(?:/(?P<name>[^/?]+))?$")
STS_PATH = re.compile(r"^/apis/apps/v1/namespaces/(?P<ns>[^/]+)/statefulsets/(?P<name>[^/?]+)$")


def _status(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
            "reason": reason, "message": message}


class Recorded:
    """One request as the fake saw it."""

    def __init__(self, method: str, path: str, body: dict | None, token: str, status: int) -> None:
        self.method, self.path, self.body, self.token, self.status = method, path, body, token, status
        self.time = time.monotonic()

    def __repr__(self) -> str:
        return "<%s %s -> %s>" % (self.method, self.path, self.status)


class FakeKube:
    def __init__(self, namespace: str = "slurm", token: str = "token-1", certfile: str = "", keyfile: str = "") -> None:
        self.namespace = namespace
        self.token = token
        self.pods: dict[str, dict] = {}
        self.statefulsets: dict[str, dict] = {}
        self.requests: list[Recorded] = []
        self.lock = threading.RLock()
        # status codes to answer instead of handling, keyed by method: a list, consumed one per call
        self.faults: dict[str, list[int]] = {}
        self.on_request: Callable[[str, str], None] | None = None
        self.on_create: Callable[[dict], None] | None = None
        self.on_delete: Callable[[dict, int], float] | None = None
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self.scheme = "http"
        if certfile:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(certfile, keyfile or None)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
            self.scheme = "https"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._timers: list[threading.Timer] = []

    # ----------------------------------------------------------------------------------- control
    @property
    def url(self) -> str:
        return "%s://127.0.0.1:%d" % (self.scheme, self._server.server_address[1])

    def start(self) -> "FakeKube":
        self._thread.start()
        return self

    def stop(self) -> None:
        for timer in self._timers:
            timer.cancel()
        self._server.shutdown()
        self._server.server_close()

    def add_statefulset(self, name: str) -> str:
        uid = str(uuid.uuid4())
        self.statefulsets[name] = {"apiVersion": "apps/v1", "kind": "StatefulSet",
                                   "metadata": {"name": name, "namespace": self.namespace, "uid": uid}}
        return uid

    def add_pod(self, name: str, phase: str = "Running", terminating: bool = False) -> dict:
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": self.namespace, "uid": str(uuid.uuid4())},
               "spec": {}, "status": {"phase": phase}}
        if terminating:
            pod["metadata"]["deletionTimestamp"] = _now()
        with self.lock:
            self.pods[name] = pod
        return pod

    def remove_pod(self, name: str, uid: str | None = None) -> None:
        with self.lock:
            pod = self.pods.get(name)
            if pod is not None and (uid is None or pod["metadata"]["uid"] == uid):
                del self.pods[name]

    def set_phase(self, name: str, phase: str) -> None:
        with self.lock:
            if name in self.pods:
                self.pods[name]["status"]["phase"] = phase

    def calls(self, method: str | None = None, name: str | None = None) -> list[Recorded]:
        with self.lock:
            return [r for r in self.requests
                    if (method is None or r.method == method)
                    and (name is None or r.path.rstrip("/").endswith("/" + name)
                         or (r.body or {}).get("metadata", {}).get("name") == name)]

    # ----------------------------------------------------------------------------------- serving
    def _handler_class(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _dispatch(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                auth = self.headers.get("Authorization", "")
                token = auth[len("Bearer "):] if auth.startswith("Bearer ") else ""
                path = self.path.split("?", 1)[0]
                if fake.on_request is not None:
                    fake.on_request(self.command, path)
                status, answer = fake.handle(self.command, path, body, token)
                with fake.lock:
                    fake.requests.append(Recorded(self.command, path, body, token, status))
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = _dispatch

        return Handler

    def handle(self, method: str, path: str, body: dict | None, token: str) -> tuple[int, dict]:
        with self.lock:
            faults = self.faults.get(method)
            if faults:
                code = faults.pop(0)
                return code, _status(code, "Injected", "fault injected by the test")
        if token != self.token:
            return 401, _status(401, "Unauthorized", "Unauthorized")
        match = POD_PATH.match(path)
        if match and match.group("ns") == self.namespace:
            name = match.group("name")
            if method == "GET" and name:
                return self._get_pod(name)
            if method == "POST" and not name:
                return self._create_pod(body or {})
            if method == "DELETE" and name:
                return self._delete_pod(name, body or {})
        match = STS_PATH.match(path)
        if match and method == "GET" and match.group("ns") == self.namespace:
            sts = self.statefulsets.get(match.group("name"))
            if sts is None:
                return 404, _status(404, "NotFound", "statefulsets.apps %s not found" % match.group("name"))
            return 200, sts
        return 404, _status(404, "NotFound", "the server could not find the requested resource")

    def _get_pod(self, name: str) -> tuple[int, dict]:
        with self.lock:
            pod = self.pods.get(name)
            if pod is None:
                return 404, _status(404, "NotFound", 'pods "%s" not found' % name)
            return 200, copy.deepcopy(pod)

    def _create_pod(self, pod: dict) -> tuple[int, dict]:
        name = pod.get("metadata", {}).get("name")
        if not name:
            return 422, _status(422, "Invalid", "metadata.name is required")
        with self.lock:
            if name in self.pods:
                return 409, _status(409, "AlreadyExists", 'pods "%s" already exists' % name)
            stored = copy.deepcopy(pod)
            stored["metadata"]["uid"] = str(uuid.uuid4())
            stored["metadata"]["creationTimestamp"] = _now()
            stored["status"] = {"phase": "Pending"}
            self.pods[name] = stored
        if self.on_create is not None:
            self.on_create(copy.deepcopy(stored))
        return 201, copy.deepcopy(stored)

    def _delete_pod(self, name: str, options: dict) -> tuple[int, dict]:
        with self.lock:
            pod = self.pods.get(name)
            if pod is None:
                return 404, _status(404, "NotFound", 'pods "%s" not found' % name)
            want_uid = (options.get("preconditions") or {}).get("uid")
            if want_uid and want_uid != pod["metadata"]["uid"]:
                return 409, _status(409, "Conflict", "Precondition failed: UID in precondition: %s" % want_uid)
            grace = int(options.get("gracePeriodSeconds", 30))
            if pod["metadata"].get("deletionTimestamp"):
                return 200, copy.deepcopy(pod)
            pod["metadata"]["deletionTimestamp"] = _now()
            pod["metadata"]["deletionGracePeriodSeconds"] = grace
            snapshot = copy.deepcopy(pod)
        linger = self.on_delete(snapshot, grace) if self.on_delete is not None else 0.0
        if linger and linger > 0:
            timer = threading.Timer(linger, self.remove_pod, args=(name, snapshot["metadata"]["uid"]))
            timer.daemon = True
            self._timers.append(timer)
            timer.start()
        else:
            self.remove_pod(name, snapshot["metadata"]["uid"])
        return 200, snapshot


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
