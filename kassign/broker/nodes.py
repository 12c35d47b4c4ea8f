"""Kill and restart single nodes of a local cluster this process owns (coordinator failover tests).

The commands go to the cluster's supervisor (:mod:`kassign.broker.supervisor`) on the pipe it
already watches, so a node killed on purpose is not mistaken for a node that died on its own and
the supervisor stays the only process that starts and reaps the nodes.
"""

from __future__ import annotations

import json
import logging
import struct
import subprocess
import threading
import time
from collections.abc import Mapping

from kassign.broker.errors import BrokerUnavailable
from kassign.broker.probe import probe_metadata

log = logging.getLogger(__name__)

__all__ = ["NodeControl"]


class NodeControl:
    """The owner's side of a supervisor's command pipe: ``ports`` maps node id -> client port."""

    def __init__(self, proc: subprocess.Popen, ports: Mapping[int, int], tls: Mapping[str, str] | None = None) -> None:
        self._proc = proc
        self._ports = dict(ports)
        self._tls = dict(tls) if tls else None  # a secured cluster's probe files (its INTERNAL listener)
        self._lock = threading.Lock()  # one command and its answer at a time

    @property
    def node_ids(self) -> tuple[int, ...]:
        """The cluster's node ids."""
        return tuple(sorted(self._ports))

    def _command(self, line: str) -> dict:
        if self._proc.stdin is None or self._proc.stdout is None or self._proc.stdin.closed:
            raise BrokerUnavailable("this cluster's supervisor takes no commands (it is stopped or detached)")
        with self._lock:
            try:
                self._proc.stdin.write(line + "\n")
                self._proc.stdin.flush()
                answer = self._proc.stdout.readline()
            except (OSError, ValueError) as exc:  # ValueError: the pipe was closed meanwhile
                raise BrokerUnavailable(f"the broker supervisor is gone ({exc})") from None
        if not answer:
            raise BrokerUnavailable("the broker supervisor is gone (no answer to a command)")
        reply = json.loads(answer)
        if not reply.get("ok"):
            raise BrokerUnavailable(f"{line}: {reply.get('error')}")
        return reply

    def _check(self, node_id: int) -> None:
        if node_id not in self._ports:
            raise BrokerUnavailable(f"no node {node_id}; the cluster's nodes are {list(self.node_ids)}")

    def kill(self, node_id: int) -> None:
        """SIGKILL node ``node_id`` (no controlled shutdown) and wait until its process is gone."""
        self._check(node_id)
        reply = self._command(f"kill {node_id}")
        log.info("killed node %s (pid %s)", node_id, reply.get("pid"))

    def restart(self, node_id: int, timeout: float = 90.0) -> float:
        """Start a killed node again on its data and wait until it serves clients again and lists
        every node (it has caught up and is unfenced); returns the seconds that took."""
        self._check(node_id)
        began = time.monotonic()
        self._command(f"start {node_id}")
        port, everyone = self._ports[node_id], len(self._ports)
        deadline = began + timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            try:
                seen = probe_metadata("127.0.0.1", port, timeout=2.0, tls=self._tls)
                if seen >= everyone:
                    took = time.monotonic() - began
                    log.info("node %s is back after %.1f s", node_id, took)
                    return took
                last = f"lists {seen} of {everyone} nodes"
            except (OSError, ConnectionError, struct.error) as exc:
                last = str(exc)
            time.sleep(0.2)
        raise BrokerUnavailable(f"node {node_id} did not come back within {timeout:.0f} s ({last})")
