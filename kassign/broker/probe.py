"""Is a broker up, and which node coordinates a group? One Metadata or FindCoordinator request on the
wire, before (and without) any client library."""

from __future__ import annotations

import socket
import ssl
import struct
import subprocess
import time
from collections.abc import Callable

from kassign.broker.errors import BrokerUnavailable

__all__ = [
    "split_bootstrap",
    "probe_metadata",
    "wait_for_broker",
    "find_coordinator",
    "free_port",
    "port_in_use",
    "api_versions",
    "consumer_group_protocol_missing",
    "CONSUMER_GROUP_HEARTBEAT",
    "tls_context",
]

#: The API key of ConsumerGroupHeartbeat (KIP-848): a broker that lists it speaks the consumer group protocol.
CONSUMER_GROUP_HEARTBEAT = 68

#: FindCoordinator errors that only mean "not yet": the coordinator is loading, moving or being elected.
_COORDINATOR_RETRIABLE = {14: "COORDINATOR_LOAD_IN_PROGRESS", 15: "COORDINATOR_NOT_AVAILABLE", 16: "NOT_COORDINATOR"}


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


def tls_context(tls: dict[str, str]) -> ssl.SSLContext:
    """A client TLS context from ``{"ca": ..., "cert": ..., "key": ...}`` (PEM files; cert and key optional)."""
    context = ssl.create_default_context(cafile=tls["ca"])
    if tls.get("cert"):
        context.load_cert_chain(tls["cert"], tls.get("key"))
    return context


def _exchange(
    host: str, port: int, request: bytes, correlation_id: int, timeout: float, tls: dict[str, str] | None = None
) -> bytes:
    """Send one request (over TLS when ``tls`` names the files, see :func:`tls_context`); returns the
    response body after its correlation id."""
    with socket.create_connection((host, port), timeout=timeout) as raw:
        sock = tls_context(tls).wrap_socket(raw, server_hostname=host) if tls else raw
        sock.settimeout(timeout)
        sock.sendall(request)
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        payload = _recv_exact(sock, size)
    (answered,) = struct.unpack(">i", payload[:4])
    if answered != correlation_id:
        raise ConnectionError(f"answer has correlation id {answered}, sent {correlation_id}")
    return payload[4:]


def _find_coordinator_request(group_id: str, correlation_id: int) -> bytes:
    # FindCoordinator v1 (api key 10): the newest without flexible encoding; key type 0 is a group.
    client_id = b"kassign-probe"
    key = group_id.encode()
    body = (
        struct.pack(">hhih", 10, 1, correlation_id, len(client_id))
        + client_id
        + struct.pack(">h", len(key))
        + key
        + struct.pack(">b", 0)
    )
    return struct.pack(">i", len(body)) + body


def _coordinator_answer(body: bytes) -> tuple[int, int]:
    """(error code, node id) of a FindCoordinator v1 response body."""
    _throttle_ms, error = struct.unpack(">ih", body[:6])
    (message_len,) = struct.unpack(">h", body[6:8])
    at = 8 + max(0, message_len)  # a null error message has length -1
    (node_id,) = struct.unpack(">i", body[at : at + 4])
    return error, node_id


def find_coordinator(bootstrap: str, group_id: str, timeout: float = 30.0) -> int:
    """The node id of the broker coordinating ``group_id`` (FindCoordinator, asked of each bootstrap
    address in turn); waits while the coordinator is being elected or loaded, raises
    :class:`BrokerUnavailable` when no answer names one within ``timeout`` seconds."""
    addrs = split_bootstrap(bootstrap)
    deadline = time.monotonic() + timeout
    last: str = "no answer"
    while True:
        for host, port in addrs:
            try:
                error, node_id = _coordinator_answer(
                    _exchange(host, port, _find_coordinator_request(group_id, 11), 11, timeout=2.0)
                )
            except (OSError, ConnectionError, struct.error) as exc:
                last = f"{host}:{port}: {exc}"
                continue
            if error == 0 and node_id >= 0:
                return node_id
            if error not in _COORDINATOR_RETRIABLE:
                raise BrokerUnavailable(
                    f"FindCoordinator for group {group_id!r} at {host}:{port} failed with error code {error}"
                )
            last = f"{host}:{port}: {_COORDINATOR_RETRIABLE[error]}"
        if time.monotonic() >= deadline:
            raise BrokerUnavailable(
                f"no coordinator for group {group_id!r} at {bootstrap} within {timeout:.0f} s ({last})"
            )
        time.sleep(0.1)


def _api_versions_request(correlation_id: int) -> bytes:
    # ApiVersions v0 (api key 18): every broker answers it (a client's first request), Kafka 4 included.
    client_id = b"kassign-probe"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


def api_versions(bootstrap: str, timeout: float = 5.0) -> dict[int, tuple[int, int]]:
    """The APIs the first answering bootstrap address supports: api key -> (min version, max version).

    Raises :class:`BrokerUnavailable` when no address answers, or one answers with an error.
    """
    last: str = "no address"
    for host, port in split_bootstrap(bootstrap):
        try:
            body = _exchange(host, port, _api_versions_request(13), 13, timeout)
            error, count = struct.unpack(">hi", body[:6])
            if error:
                raise BrokerUnavailable(f"ApiVersions at {host}:{port} failed with error code {error}")
            keys = [struct.unpack(">hhh", body[6 + 6 * i : 12 + 6 * i]) for i in range(count)]
            return {key: (low, high) for key, low, high in keys}
        except (OSError, ConnectionError, struct.error) as exc:
            last = f"{host}:{port}: {exc}"
    raise BrokerUnavailable(f"no ApiVersions answer from {bootstrap} ({last})")


def consumer_group_protocol_missing(bootstrap: str, timeout: float = 5.0) -> str | None:
    """None when the broker speaks the consumer group protocol as kassign needs it, else why not, in
    a few words. Raises :class:`BrokerUnavailable` without an answer.

    The test is ConsumerGroupHeartbeat (API key 68) at version 1 or later: version 1 came with the
    protocol's general availability in Kafka 4.0. Kafka 3.7-3.9 list version 0 (the preview) and,
    unless an operator enabled the preview, answer it UNSUPPORTED_VERSION.
    """
    versions = api_versions(bootstrap, timeout).get(CONSUMER_GROUP_HEARTBEAT)
    if versions is not None and versions[1] >= 1:
        return None
    listed = "lists none" if versions is None else f"lists only version {versions[1]} (the pre-4.0 preview)"
    return (
        f"no consumer group protocol (KIP-848): ApiVersions {listed} of ConsumerGroupHeartbeat "
        f"(API key {CONSUMER_GROUP_HEARTBEAT}); it needs Apache Kafka 4.0+"
    )


def probe_metadata(host: str, port: int, timeout: float, tls: dict[str, str] | None = None) -> int:
    """Send one Metadata request (over TLS with ``tls``); returns the number of brokers in the answer."""
    _throttle_ms, n_brokers = struct.unpack(">ii", _exchange(host, port, _metadata_request(7), 7, timeout, tls)[:8])
    return n_brokers


def wait_for_broker(
    bootstrap: str,
    timeout: float = 30.0,
    *,
    process: subprocess.Popen | None = None,
    min_brokers: int = 1,
    alive: Callable[[], str | None] | None = None,
    tls: dict[str, str] | None = None,
) -> None:
    """Block until some bootstrap address answers Metadata listing at least ``min_brokers`` brokers
    (asked over mutual TLS when ``tls`` names the CA, certificate and key files).

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
                seen = probe_metadata(host, port, timeout=2.0, tls=tls)
                if seen >= min_brokers:
                    return
                last_error = ConnectionError(f"{host}:{port} lists {seen} of {min_brokers} brokers")
            except (OSError, ConnectionError, struct.error) as exc:
                last_error = exc
        time.sleep(0.1)
    raise BrokerUnavailable(f"no broker answered metadata at {bootstrap} within {timeout:.0f} s ({last_error})")
