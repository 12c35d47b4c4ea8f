"""Is a broker up? One Metadata request on the wire, before (and without) any client library."""

from __future__ import annotations

import socket
import struct
import subprocess
import time
from collections.abc import Callable

from kassign.broker.errors import BrokerUnavailable

__all__ = ["split_bootstrap", "probe_metadata", "wait_for_broker", "free_port", "port_in_use"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """True when ``host:port`` cannot be bound (something listens there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def split_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    """``"h1:9092,h2:9093"`` as ``[("h1", 9092), ("h2", 9093)]``; ValueError naming a malformed item."""
    addrs = []
    for item in bootstrap.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"bootstrap address {item!r} is not host:port")
        addrs.append((host.strip("[]") or "127.0.0.1", int(port)))
    if not addrs:
        raise ValueError(f"empty bootstrap address list {bootstrap!r}")
    return addrs


def _metadata_request(correlation_id: int) -> bytes:
    # Metadata v4 (api key 3): Kafka 4 dropped v0-v3, and v4 is the newest without flexible encoding.
    # Body: a null topic array (all topics), allow_auto_topic_creation=false.
    client_id = b"kassign-probe"
    header = struct.pack(">hhih", 3, 4, correlation_id, len(client_id)) + client_id
    body = header + struct.pack(">ib", -1, 0)
    return struct.pack(">i", len(body)) + body


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return buf


def probe_metadata(host: str, port: int, timeout: float) -> int:
    """Send one Metadata request; returns the number of brokers in the answer."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(_metadata_request(7))
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        payload = _recv_exact(sock, size)
    correlation_id, _throttle_ms, n_brokers = struct.unpack(">iii", payload[:12])
    if correlation_id != 7:
        raise ConnectionError(f"metadata answer has correlation id {correlation_id}, sent 7")
    return n_brokers


def wait_for_broker(bootstrap: str, timeout: float = 30.0, *, process: subprocess.Popen | None = None,
                    min_brokers: int = 1, alive: Callable[[], str | None] | None = None) -> None:
    """Block until some bootstrap address answers Metadata listing at least ``min_brokers`` brokers.

    Raises :class:`BrokerUnavailable` after ``timeout`` seconds, or at once when ``process`` has exited
    or ``alive()`` returns a reason the broker is gone.
    """
    addrs = split_bootstrap(bootstrap)
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise BrokerUnavailable(f"broker process exited with code {process.returncode} before answering")
        gone = alive() if alive is not None else None
        if gone:
            raise BrokerUnavailable(gone)
        for host, port in addrs:
            try:
                seen = probe_metadata(host, port, timeout=2.0)
                if seen >= min_brokers:
                    return
                last_error = ConnectionError(f"{host}:{port} lists {seen} of {min_brokers} brokers")
            except (OSError, ConnectionError, struct.error) as exc:
                last_error = exc
        time.sleep(0.1)
    raise BrokerUnavailable(f"no broker answered metadata at {bootstrap} within {timeout:.0f} s ({last_error})")
