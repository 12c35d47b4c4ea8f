"""A throw-away certificate authority for a local TLS broker, made with Python's ``cryptography``.

:func:`make_tls_files` writes into a directory: the CA certificate (``ca.pem``, the truststore of the
brokers and of every client), a certificate for the brokers (``CN=broker``, valid for ``127.0.0.1``
and ``localhost``) as a PKCS12 keystore, and one client certificate and key (PEM) per user, whose
common name is the user's name (the brokers map ``CN=NAME`` to ``User:NAME``). Everything is valid
for a few days: a local broker lives for a test run or an experiment, not longer.

Needs the ``broker`` extra (``cryptography``).
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kassign.broker.errors import BrokerUnavailable

log = logging.getLogger(__name__)

__all__ = ["TlsFiles", "make_tls_files", "BROKER_CN"]

#: The common name of the brokers' certificate, and so (through the principal mapping) their principal.
BROKER_CN = "broker"

_VALID_DAYS = 7


@dataclass(frozen=True)
class TlsFiles:
    """Where :func:`make_tls_files` put everything; ``clients`` maps a user to its (cert, key) PEM paths."""

    ca: Path
    keystore: Path
    keystore_password: str
    broker_cert: Path
    broker_key: Path
    clients: dict[str, tuple[Path, Path]] = field(default_factory=dict)


def _crypto():  # noqa: ANN202 - the module is an optional dependency, imported lazily
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.serialization import pkcs12
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError:
        raise BrokerUnavailable("a TLS broker needs the cryptography package: pip install 'kassign[broker]'") from None
    return x509, hashes, serialization, ec, pkcs12, ExtendedKeyUsageOID, NameOID


def _write_private(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    path.chmod(0o600)


def make_tls_files(directory: Path, users: Iterable[str]) -> TlsFiles:
    """Create a CA, the brokers' keystore and a client certificate per user in ``directory``."""
    x509, hashes, serialization, ec, pkcs12, eku, oid = _crypto()
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    until = now + datetime.timedelta(days=_VALID_DAYS)

    def name(cn: str):  # noqa: ANN202
        return x509.Name([x509.NameAttribute(oid.COMMON_NAME, cn)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = name("kassign local CA")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )

    def issue(cn: str, *, server: bool):  # noqa: ANN202
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(cn))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(until)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage([eku.SERVER_AUTH, eku.CLIENT_AUTH] if server else [eku.CLIENT_AUTH]),
                critical=False,
            )
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
        return key, builder.sign(ca_key, hashes.SHA256())

    pem = serialization.Encoding.PEM
    ca_path = directory / "ca.pem"
    ca_path.write_bytes(ca_cert.public_bytes(pem))

    def write_pair(cn: str, key, cert) -> tuple[Path, Path]:  # noqa: ANN001
        cert_path, key_path = directory / f"{cn}.pem", directory / f"{cn}.key"
        cert_path.write_bytes(cert.public_bytes(pem))
        _write_private(
            key_path, key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        )
        return cert_path, key_path

    broker_key, broker_cert = issue(BROKER_CN, server=True)
    broker_cert_path, broker_key_path = write_pair(BROKER_CN, broker_key, broker_cert)
    password = secrets.token_urlsafe(18)
    keystore = directory / "broker.p12"
    _write_private(
        keystore,
        pkcs12.serialize_key_and_certificates(
            BROKER_CN.encode(),
            broker_key,
            broker_cert,
            [ca_cert],
            serialization.BestAvailableEncryption(password.encode()),
        ),
    )
    clients = {}
    for user in users:
        if user == BROKER_CN:
            raise BrokerUnavailable(f"user name {user!r} is taken by the brokers' own certificate; pick another")
        clients[user] = write_pair(user, *issue(user, server=False))
    log.info(
        "TLS files for a local broker in %s (CA, broker keystore, %d client certificates)", directory, len(clients)
    )
    return TlsFiles(
        ca=ca_path,
        keystore=keystore,
        keystore_password=password,
        broker_cert=broker_cert_path,
        broker_key=broker_key_path,
        clients=clients,
    )
