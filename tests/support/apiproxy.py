"""A Kubernetes API that can go away in the middle of a run (tests/k8s/test_bad_input.py, benchmarks/).

Playbooks are pointed at the relay through a kubeconfig of their own (kubeconfig_to); cutting the relay is, for
them, an API server that stops answering, while the real one and every other client go on."""

from __future__ import annotations

import json
import socket
import threading

import yaml


class Proxy:
    """A TCP relay 127.0.0.1:<port> -> the API server, that can be cut (every connection closed)."""

    def __init__(self, target=("127.0.0.1", 6443)):
        self.target = target
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.sockets: list[socket.socket] = []
        self.cut = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.cut.is_set():
            try:
                client, _addr = self.server.accept()
            except OSError:
                return
            if self.cut.is_set():
                client.close()
                return
            upstream = socket.create_connection(self.target)
            self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src, dst):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def stop(self):
        self.cut.set()
        self.server.close()
        for sock in self.sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            except OSError:
                pass


def kubeconfig_to(kube, path, server=None, context=None):
    config = yaml.safe_load(open(kube.kubeconfig))
    if server:
        config["clusters"][0]["cluster"]["server"] = server
    path.write_text(json.dumps(config))
    return str(path)
