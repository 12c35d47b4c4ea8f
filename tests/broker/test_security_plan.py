"""The plan of a secured local broker (kassign.broker.security, kassign.broker.tls), the version checks
(kassign.broker.versions) and the command line's one-line refusals: no broker, no Java."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kassign.broker.errors import BrokerUnavailable
from kassign.broker.kafka import _node_properties
from kassign.broker.security import ClientSecurity, check_security, check_users, plan_security
from kassign.broker.versions import TESTED_KAFKA_VERSIONS, kafka_version


def test_the_tested_versions_are_valid_and_older_or_malformed_ones_are_named():
    assert [kafka_version(v) for v in TESTED_KAFKA_VERSIONS] == list(TESTED_KAFKA_VERSIONS)
    for bad, needle in (("3.2.3", "3.3.0 or newer"), ("4.0", "MAJOR.MINOR.PATCH"), ("latest", "'latest'")):
        with pytest.raises(BrokerUnavailable, match=needle):
            kafka_version(bad)


def test_modes_and_the_versions_they_need():
    assert check_security("plaintext", "3.3.2") is None
    assert check_security("ssl", "3.3.2") == "SSL"  # client certificates need no SCRAM
    assert check_security("sasl-ssl", "3.5.0") == "SASL_SSL"
    with pytest.raises(BrokerUnavailable, match=r"3\.5 or newer.*3\.4\.1"):
        check_security("sasl-scram", "3.4.1")
    with pytest.raises(BrokerUnavailable, match="'kerberos'"):
        check_security("kerberos", "4.4.0")


def test_users_are_checked_and_admin_is_always_there():
    users = check_users({"alice": "s3cret", "bob": None})
    assert set(users) == {"admin", "alice", "bob"} and users["alice"] == "s3cret" and len(users["bob"]) >= 16
    for bad, needle in (({"a b": None}, "'a b'"), ({"broker": None}, "'broker'"), ({"x": "p,w"}, "'x'")):
        with pytest.raises(BrokerUnavailable, match=needle):
            check_users(bad)
    with pytest.raises(BrokerUnavailable, match="need a --security mode"):
        plan_security("plaintext", "4.4.0", __import__("pathlib").Path("/nonexistent"), {"alice": None})


def test_a_sasl_ssl_plan_has_scram_users_the_authorizer_and_mutual_tls_inside(tmp_path):
    plan = plan_security("sasl-ssl", "4.4.0", tmp_path / "tls", {"alice": "alice-pw"})
    props = plan.properties
    assert props["authorizer.class.name"].endswith("StandardAuthorizer")
    assert props["allow.everyone.if.no.acl.found"] == "false"
    assert props["super.users"] == "User:admin;User:broker"
    assert props["listener.name.client.ssl.client.auth"] == "none" and props["ssl.client.auth"] == "required"
    assert "ScramLoginModule" in props["listener.name.client.scram-sha-512.sasl.jaas.config"]
    scram = [plan.format_args[i + 1] for i, a in enumerate(plan.format_args) if a == "--add-scram"]
    assert "SCRAM-SHA-256=[name=alice,password=alice-pw]" in scram and len(scram) == 4  # 2 users x 2 mechanisms
    for path in (props["ssl.keystore.location"], props["ssl.truststore.location"], *plan.probe_tls.values()):
        assert (tmp_path / "tls").joinpath(path).exists()
    node = _node_properties(
        1,
        9092,
        "1@127.0.0.1:9093",
        tmp_path,
        None,
        controller_port=9093,
        settings={},
        internal_port=9094,
        security=plan,
    )
    assert node["listeners"] == "CLIENT://127.0.0.1:9092,INTERNAL://127.0.0.1:9094,CONTROLLER://127.0.0.1:9093"
    assert node["advertised.listeners"] == "CLIENT://127.0.0.1:9092,INTERNAL://127.0.0.1:9094"
    assert node["listener.security.protocol.map"] == "CONTROLLER:SSL,INTERNAL:SSL,CLIENT:SASL_SSL"
    assert node["inter.broker.listener.name"] == "INTERNAL"


def test_the_generated_certificates_chain_to_the_ca(tmp_path):
    import ssl

    plan = plan_security("ssl", "3.3.2", tmp_path, {"alice": None})
    client = plan.client
    assert set(client.client_certs) == {"admin", "alice"} and client.users == {"admin": "", "alice": ""}
    context = ssl.create_default_context(cafile=client.ca_file)  # loads: the CA is a CA
    cert, key = client.client_certs["alice"]
    context.load_cert_chain(cert, key)  # the key matches the certificate
    from cryptography import x509

    ca = x509.load_pem_x509_certificate(Path(client.ca_file).read_bytes())
    for path in (cert, plan.probe_tls["cert"]):
        x509.load_pem_x509_certificate(Path(path).read_bytes()).verify_directly_issued_by(ca)


def test_client_settings_for_aiokafka_librdkafka_and_the_printed_lines(tmp_path):
    pytest.importorskip("aiokafka")
    plan = plan_security("sasl-scram", "4.4.0", tmp_path, {"alice": "pw"})
    client = ClientSecurity.from_json(plan.client.to_json())
    assert client == plan.client
    settings = client.aiokafka_settings("alice")
    assert settings == {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "pw",
    }
    assert client.aiokafka_settings("alice", password="wrong")["sasl_plain_password"] == "wrong"
    assert client.librdkafka_settings("alice") == {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "pw",
    }
    assert eval("dict(" + " ".join(client.aiokafka_lines("alice")) + ")") == settings  # noqa: S307
    with pytest.raises(KeyError, match="'carol'"):
        client.aiokafka_settings("carol")


def _cli(*args: str, tmp_path) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [sys.executable, "-m", "kassign.cli", "broker", "start", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "KASSIGN_RUN_DIR": str(tmp_path)},
    )


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--security", "kerberos"), "kerberos"),
        (("--user", ":pw", "--security", "ssl"), "':pw'"),
        (("--user", "alice"), "--user alice needs a --security mode"),
        (("--tansu", "--security", "ssl"), "--security ssl"),
        (("--version", "3.2.3"), "3.2.3"),
    ],
    ids=["unknown-mode", "nameless-user", "user-without-security", "tansu-secured", "pre-kraft-version"],
)
def test_bad_security_options_are_one_line(args, needle, tmp_path):
    res = _cli(*args, tmp_path=tmp_path)
    assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr
    lines = [line for line in res.stderr.strip().splitlines() if line.strip()]
    assert any(needle in line for line in lines) and len(lines) <= 2, res.stderr  # argparse adds a usage line
