"""A secured local Apache Kafka: SASL/SCRAM users, TLS from a throw-away CA, the standard authorizer.

Modes (``kassign broker start --security MODE``, ``start_kafka(security=MODE)``):

``plaintext``
    the default: no authentication, no authorizer (what the test suite runs on).
``sasl-scram``
    clients authenticate with SCRAM-SHA-256 or SCRAM-SHA-512 over SASL_PLAINTEXT.
``sasl-ssl``
    the same over TLS (SASL_SSL): clients trust the generated CA.
``ssl``
    mutual TLS: each user has a client certificate (``CN=NAME`` is ``User:NAME``).

In every secured mode the nodes run ``StandardAuthorizer`` with ``allow.everyone.if.no.acl.found=false``;
``admin`` (and the brokers' own ``User:broker``) are super users, any other user gets only what ACLs
grant. Each node has three listeners: ``CLIENT`` (the mode's protocol, the bootstrap address),
``INTERNAL`` (mutual TLS, between brokers) and ``CONTROLLER`` (mutual TLS, KRaft); the brokers and
controllers authenticate each other with the ``broker`` certificate, so no listener is open to an
anonymous principal. SCRAM users are created when the storage is formatted (``kafka-storage format
--add-scram``, KIP-900), which needs Kafka 3.5 or newer (``ssl`` runs on 3.3+).
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kassign.broker.errors import BrokerUnavailable
from kassign.broker.tls import BROKER_CN, make_tls_files
from kassign.broker.versions import version_tuple

log = logging.getLogger(__name__)

__all__ = [
    "SECURITY_MODES",
    "SUPER_USER",
    "SCRAM_MECHANISMS",
    "ClientSecurity",
    "SecurityPlan",
    "plan_security",
    "check_security",
    "MIN_SECURE_VERSION",
]

#: mode -> the client listener's security protocol (None: the plain PLAINTEXT cluster).
SECURITY_MODES: dict[str, str | None] = {
    "plaintext": None,
    "sasl-scram": "SASL_PLAINTEXT",
    "sasl-ssl": "SASL_SSL",
    "ssl": "SSL",
}
#: The super user every secured cluster has (besides the brokers' own principal).
SUPER_USER = "admin"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
#: The first Kafka whose storage tool creates SCRAM users at format time (KIP-900).
MIN_SECURE_VERSION = (3, 5)  # ssl (client certificates) needs no SCRAM: 3.3+

_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_PASSWORD = re.compile(r"^[A-Za-z0-9._~-]{1,128}$")  # nothing kafka-storage's --add-scram syntax would split on
_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def check_security(mode: str, version: str) -> str | None:
    """The client listener's protocol for ``mode`` (None for plaintext); :class:`BrokerUnavailable`
    naming the value for an unknown mode or a Kafka too old for it."""
    if mode not in SECURITY_MODES:
        raise BrokerUnavailable(f"security mode {mode!r}: expected one of {', '.join(SECURITY_MODES)}")
    protocol = SECURITY_MODES[mode]
    if protocol is None:
        return None
    if protocol.startswith("SASL_") and version_tuple(version)[:2] < MIN_SECURE_VERSION:
        low = ".".join(map(str, MIN_SECURE_VERSION))
        raise BrokerUnavailable(
            f"--security {mode} needs Apache Kafka {low} or newer (SCRAM users at format time, KIP-900); got {version}"
        )
    return protocol


def check_users(users: Mapping[str, str | None]) -> dict[str, str]:
    """``users`` with a generated password for each None, checked (:class:`BrokerUnavailable` naming a bad one);
    the super user ``admin`` is always there."""
    out = {SUPER_USER: secrets.token_urlsafe(16)}
    for user, password in users.items():
        if not _NAME.match(user) or user == BROKER_CN:
            raise BrokerUnavailable(
                f"user name {user!r}: use 1-64 letters, digits, '.', '_' or '-' (not {BROKER_CN!r})"
            )
        if password is not None and not _PASSWORD.match(password):
            raise BrokerUnavailable(f"password of user {user!r}: use 1-128 letters, digits or . _ ~ -")
        out[user] = password or secrets.token_urlsafe(16)
    return out


@dataclass(frozen=True)
class ClientSecurity:
    """What a client needs to reach a secured cluster: the protocol, the users (name -> password; the
    SCRAM credentials, or '' in ``ssl`` mode), the CA file and, in ``ssl`` mode, each user's
    certificate and key files. Serialisable (:meth:`to_json`) for a detached broker's state file."""

    mode: str
    security_protocol: str
    users: dict[str, str]
    ca_file: str
    client_certs: dict[str, tuple[str, str]] = field(default_factory=dict)
    mechanism: str = "SCRAM-SHA-512"

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SASL_SSL", "SSL")

    def _user(self, user: str | None) -> str:
        user = user or SUPER_USER
        if user not in self.users:
            raise KeyError(f"no user {user!r} on this cluster; its users are {', '.join(sorted(self.users))}")
        return user

    def aiokafka_settings(
        self, user: str | None = None, *, password: str | None = None, mechanism: str | None = None
    ) -> dict[str, Any]:
        """Keyword arguments for ``CooperativeConsumer`` / ``AIOKafkaConsumer`` / ``AIOKafkaProducer`` /
        ``AIOKafkaAdminClient`` as ``user`` (default ``admin``); ``password`` overrides the real one
        (a test of a wrong password)."""
        from aiokafka.helpers import create_ssl_context

        user = self._user(user)
        out: dict[str, Any] = {"security_protocol": self.security_protocol}
        if self.sasl:
            out.update(
                sasl_mechanism=mechanism or self.mechanism,
                sasl_plain_username=user,
                sasl_plain_password=self.users[user] if password is None else password,
            )
        if self.tls:
            cert, key = self.client_certs.get(user, (None, None)) if not self.sasl else (None, None)
            out["ssl_context"] = create_ssl_context(cafile=self.ca_file, certfile=cert, keyfile=key)
        return out

    def librdkafka_settings(self, user: str | None = None) -> dict[str, str]:
        """The same for confluent-kafka / librdkafka (``Consumer``, ``AdminClient``)."""
        user = self._user(user)
        out = {"security.protocol": self.security_protocol}
        if self.sasl:
            out.update({"sasl.mechanisms": self.mechanism, "sasl.username": user, "sasl.password": self.users[user]})
        if self.tls:
            out["ssl.ca.location"] = self.ca_file
            if not self.sasl:
                out["ssl.certificate.location"], out["ssl.key.location"] = self.client_certs[user]
        return out

    def aiokafka_lines(self, user: str | None = None) -> list[str]:
        """:meth:`aiokafka_settings` as Python keyword arguments to paste, one a line (the ssl_context
        built with ``aiokafka.helpers.create_ssl_context``)."""
        user = self._user(user)
        lines = [f'security_protocol="{self.security_protocol}",']
        if self.sasl:
            lines += [
                f'sasl_mechanism="{self.mechanism}",',
                f'sasl_plain_username="{user}",',
                f'sasl_plain_password="{self.users[user]}",',
            ]
        if self.tls:
            args = f'cafile="{self.ca_file}"'
            if not self.sasl:
                cert, key = self.client_certs[user]
                args += f', certfile="{cert}", keyfile="{key}"'
            lines.append(f"ssl_context=create_ssl_context({args}),")
        return lines

    def describe(self) -> str:
        """One line: protocol, mechanisms, users and the CA."""
        who = ", ".join(f"{u} (super user)" if u == SUPER_USER else u for u in sorted(self.users))
        how = "SCRAM-SHA-256/512 " if self.sasl else "client-certificate "
        return f"{self.security_protocol}, {how}users {who}; StandardAuthorizer; CA {self.ca_file}"

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "security_protocol": self.security_protocol,
            "users": self.users,
            "ca_file": self.ca_file,
            "client_certs": {u: list(p) for u, p in self.client_certs.items()},
            "mechanism": self.mechanism,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ClientSecurity:
        return cls(
            mode=data["mode"],
            security_protocol=data["security_protocol"],
            users=dict(data["users"]),
            ca_file=data["ca_file"],
            client_certs={u: (p[0], p[1]) for u, p in data["client_certs"].items()},
            mechanism=data.get("mechanism", "SCRAM-SHA-512"),
        )


@dataclass(frozen=True)
class SecurityPlan:
    """The broker side of a secured cluster: settings for every node, the storage tool's extra
    arguments, and the TLS files a probe uses to ask the ``INTERNAL`` listener whether the cluster is up."""

    client: ClientSecurity
    properties: dict[str, str]
    format_args: list[str]
    probe_tls: dict[str, str]


def plan_security(
    mode: str, version: str, directory: Path, users: Mapping[str, str | None] | None = None
) -> SecurityPlan | None:
    """Generate the CA and keystores in ``directory`` and plan a cluster secured as ``mode`` (None for
    ``plaintext``). ``users``: name -> password (None: generated) besides the super user ``admin``."""
    protocol = check_security(mode, version)
    if protocol is None:
        if users:
            raise BrokerUnavailable(f"users {', '.join(users)} need a --security mode; the cluster is plaintext")
        return None
    passwords = check_users(users or {})
    sasl = protocol.startswith("SASL_")
    tls = make_tls_files(directory, [] if sasl else list(passwords))
    props = {
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(tls.keystore),
        "ssl.keystore.password": tls.keystore_password,
        "ssl.key.password": tls.keystore_password,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tls.ca),
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+)$/$1/,DEFAULT",
        "authorizer.class.name": _AUTHORIZER,
        "allow.everyone.if.no.acl.found": "false",
        "super.users": f"User:{SUPER_USER};User:{BROKER_CN}",
    }
    format_args: list[str] = []
    if sasl:
        props["sasl.enabled.mechanisms"] = ",".join(SCRAM_MECHANISMS)
        props["listener.name.client.ssl.client.auth"] = "none"
        for mechanism in SCRAM_MECHANISMS:
            props[f"listener.name.client.{mechanism.lower()}.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            )
            for user, password in passwords.items():
                format_args += ["--add-scram", f"{mechanism}=[name={user},password={password}]"]
    client = ClientSecurity(
        mode=mode,
        security_protocol=protocol,
        users=passwords if sasl else {u: "" for u in passwords},
        ca_file=str(tls.ca),
        client_certs={u: (str(c), str(k)) for u, (c, k) in tls.clients.items()},
    )
    log.info("secured cluster planned: %s", client.describe())
    return SecurityPlan(
        client=client,
        properties=props,
        format_args=format_args,
        probe_tls={"ca": str(tls.ca), "cert": str(tls.broker_cert), "key": str(tls.broker_key)},
    )
