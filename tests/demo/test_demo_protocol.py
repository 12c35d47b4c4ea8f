"""``kassign demo --protocol``: the run plan per protocol, its labels, and the one-line errors of
``--protocol consumer`` (Tansu, a cluster refusing the group's timing, an old broker), with no broker."""

from __future__ import annotations

import contextlib
import dataclasses
import re

import pytest

pytest.importorskip("aiokafka")

import kassign.broker  # noqa: E402
from kassign.broker import BrokerInfo, group_config  # noqa: E402
from kassign.cli_errors import EXIT_INPUT, EXIT_RUNTIME, CLIError  # noqa: E402
from kassign.demo import cli  # noqa: E402
from kassign.demo.group import MemberFailed  # noqa: E402
from kassign.demo.runs import ALL_LABELS, PROTOCOLS, run_labels, run_specs  # noqa: E402
from kassign.demo.scenario import RunResult, _phases  # noqa: E402
from kassign.demo.summary import format_table, summary_json  # noqa: E402
from kassign.model import TopicPartition  # noqa: E402
from kassign.timeline.events import Event  # noqa: E402
from tests.refusing_admin import refusing_admin  # noqa: E402


def _run() -> RunResult:
    """A one-member run scaled out to two (hand-written)."""
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    events = [
        Event("m1", 1.0, "sync", extra={"gen": 1}),
        Event("m1", 1.0, "cb_assigned", [tp0, tp1]),
        Event("m1", 11.0, "sync", extra={"gen": 2}),
        Event("m1", 11.0, "cb_revoked", [tp1]),
        Event("m2", 11.5, "sync", extra={"gen": 2}),
        Event("m2", 11.5, "cb_assigned", [tp1]),
    ]
    marks = {"start 1 members": 0.0, "scale out 1\u21922": 10.0}
    return RunResult("cooperative", "cooperative-sticky", "g", "t", events, marks, _phases(marks, 14.0), produced=100)


@pytest.fixture
def no_broker(monkeypatch):
    """Fail the test if anything tries to start a broker."""

    def refuse(*args, **kwargs):
        raise AssertionError("a broker was started")

    monkeypatch.setattr(kassign.broker, "open_broker", refuse)
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.delenv("KASSIGN_BROKER", raising=False)


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def test_classic_is_the_default_and_unchanged():
    args = cli.parse_args([])
    assert args.protocol == "classic"
    assert [s.label for s in args.specs] == list(cli.RUN_LABELS) == ["eager", "cooperative", "fast-follow-up"]
    assert not any(s.broker_timing for s in args.specs)


def test_consumer_protocol_runs_eager_classic_kassign_and_kip848():
    specs = cli.parse_args(["--protocol", "consumer"]).specs
    assert [(s.label, s.kind, s.group_protocol) for s in specs] == [
        ("classic-eager", "eager", "classic"),
        ("classic-fast-follow-up", "fast-follow-up", "classic"),
        ("consumer-uniform", "kip848", "consumer"),
    ]
    assert [s.broker_timing for s in specs] == [False, False, True]
    assert "KIP-848" in specs[-1].title and "classic" in specs[0].title


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_labels_are_file_and_topic_names(protocol):
    for label in run_labels(protocol):
        assert re.fullmatch(r"[a-z0-9][a-z0-9-]*", label), label  # no '+', '/', spaces
    assert set(run_labels(protocol)) <= set(ALL_LABELS)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_only_follows_the_protocols_labels(protocol):
    for label in run_labels(protocol):
        assert [s.label for s in cli.parse_args(["--protocol", protocol, "--only", label]).specs] == [label]


def test_only_of_the_other_protocol_is_a_usage_error(capsys, no_broker, tmp_path):
    with pytest.raises(SystemExit) as exited:  # argparse's way, as for any bad option
        cli.main(["--protocol", "consumer", "--only", "cooperative", "--out", str(tmp_path)])
    assert exited.value.code == EXIT_INPUT
    line = _one_line_error(capsys)
    assert "not a run of --protocol consumer" in line and "consumer-uniform" in line
    with pytest.raises(ValueError, match="unknown protocol"):
        run_specs("kip848")


@pytest.mark.parametrize("how", [["--tansu"], "env"])
def test_consumer_protocol_on_tansu_is_refused_before_anything_starts(capsys, monkeypatch, no_broker, tmp_path, how):
    argv = ["--protocol", "consumer", "--quick", "--out", str(tmp_path / "out")]
    if how == "env":
        monkeypatch.setenv("KASSIGN_BROKER", "tansu")
    else:
        argv += how
    assert cli.main(argv) == EXIT_INPUT
    line = _one_line_error(capsys)
    assert line.startswith("kassign demo: --protocol consumer needs Apache Kafka 4.0+") and "Tansu" in line
    assert not (tmp_path / "out").exists()  # refused before the output directory was made


def test_consumer_protocol_without_confluent_kafka_says_what_to_install(capsys, monkeypatch, no_broker, tmp_path):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "confluent_kafka" else real(name, *a)
    )
    assert cli.main(["--protocol", "consumer", "--out", str(tmp_path)]) == EXIT_INPUT
    assert "pip install 'kassign[demo,confluent]'" in _one_line_error(capsys)


def test_a_fallback_to_tansu_is_refused(monkeypatch, tmp_path):
    @contextlib.contextmanager
    def tansu(env=None):
        yield BrokerInfo("tansu", "127.0.0.1:1", "0.5")

    monkeypatch.setattr(kassign.broker, "open_broker", tansu)
    args = cli.parse_args(["--protocol", "consumer", "--out", str(tmp_path)])
    with contextlib.ExitStack() as stack, pytest.raises(CLIError, match="needs Apache Kafka 4.0"):
        cli._local_broker(stack, args)
    classic = cli.parse_args(["--out", str(tmp_path)])
    with contextlib.ExitStack() as stack:
        assert cli._local_broker(stack, classic).kind == "tansu"  # the classic demo runs there as before


@pytest.mark.asyncio
async def test_the_kip848_member_leaves_the_timing_to_the_group():
    from kassign.adapters.aiokafka import CooperativeConsumer

    factory = run_specs("consumer", "consumer-uniform")[0].consumer_factory()

    async def build():
        consumer = factory(
            bootstrap_servers="127.0.0.1:1",
            group_id="g",
            session_timeout_ms=1500,
            heartbeat_interval_ms=250,
            enable_auto_commit=False,
        )
        return consumer

    consumer = await build()
    assert isinstance(consumer, CooperativeConsumer)
    assert consumer.group_protocol == "consumer" and consumer._kassign_remote_assignor == "uniform"


def test_a_refused_group_config_names_the_values(monkeypatch):
    pytest.importorskip("confluent_kafka")
    from confluent_kafka import KafkaError

    reason = "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"
    monkeypatch.setattr(group_config, "_admin", lambda bootstrap: refusing_admin(KafkaError.INVALID_CONFIG, reason))
    with pytest.raises(group_config.GroupTimingRefused) as caught:
        group_config.set_consumer_group_timing("b:9092", "g", session_ms=1500, heartbeat_ms=250)
    assert caught.value.out_of_bounds and caught.value.reason == reason
    assert "consumer.session.timeout.ms=1500" in str(caught.value)
    monkeypatch.setattr(
        group_config, "_admin", lambda bootstrap: refusing_admin(KafkaError.INVALID_REQUEST, "Unknown type")
    )
    with pytest.raises(group_config.GroupTimingRefused) as caught:
        group_config.set_consumer_group_timing("b:9092", "g", session_ms=1500, heartbeat_ms=250)
    assert not caught.value.out_of_bounds
    with pytest.raises(ValueError, match="heartbeat_ms < session_ms"):
        group_config.set_consumer_group_timing("b:9092", "g", session_ms=250, heartbeat_ms=250)


@pytest.mark.parametrize(
    "bounds, words",
    [
        (
            True,
            [
                "group.consumer.min.session.timeout.ms",
                "group.consumer.min.heartbeat.interval.ms",
                "--session-ms 45000 --heartbeat-ms 5000",
            ],
        ),
        (False, ["Apache Kafka 4.0+", "--protocol classic"]),
    ],
)
def test_the_demo_turns_a_refusal_into_one_line(monkeypatch, bounds, words):
    def refuse(bootstrap, group_id, *, session_ms, heartbeat_ms, timeout):
        raise group_config.GroupTimingRefused(
            "refused",
            session_ms=session_ms,
            heartbeat_ms=heartbeat_ms,
            reason="the broker's reason",
            out_of_bounds=bounds,
        )

    monkeypatch.setattr(group_config, "set_consumer_group_timing", refuse)
    with pytest.raises(CLIError) as caught:
        cli._configure_group("b:9092", "g", 6000, 500)
    text = f"{caught.value.what} ({caught.value.todo})"
    assert "consumer.session.timeout.ms=6000 and consumer.heartbeat.interval.ms=500" in text
    assert "the broker's reason" in text and all(w in text for w in words)
    assert caught.value.code == EXIT_RUNTIME


def test_the_refusal_comes_before_the_first_run(capsys, monkeypatch, no_broker, tmp_path):
    """On a cluster with Kafka's default bounds the demo stops before running anything, in one line."""
    calls = []

    def refuse(bootstrap, group_id, *, session_ms, heartbeat_ms, timeout):
        calls.append((group_id, session_ms, heartbeat_ms))
        raise group_config.GroupTimingRefused(
            "refused", session_ms=session_ms, heartbeat_ms=heartbeat_ms, reason="too low", out_of_bounds=True
        )

    async def no_run(*args, **kwargs):
        raise AssertionError("a run started")

    monkeypatch.setattr(group_config, "set_consumer_group_timing", refuse)
    monkeypatch.setattr("kassign.demo.scenario.run_protocol", no_run)
    code = cli.main(["--protocol", "consumer", "--bootstrap", "b:9092", "--out", str(tmp_path), "--no-plot"])
    assert code == EXIT_RUNTIME
    line = _one_line_error(capsys)
    assert "refused consumer.session.timeout.ms=6000" in line  # the --bootstrap defaults
    assert [c[1:] for c in calls] == [(6000, 500)] and calls[0][0].startswith("kassign-demo-consumer-uniform-")


def test_an_old_broker_is_one_line(capsys, monkeypatch, no_broker, tmp_path):
    from kassign.adapters.aiokafka.consumer_group_coordinator import GroupProtocolError

    async def old_broker(bootstrap, args, out, tty, results):
        failure = GroupProtocolError("ConsumerGroupHeartbeat: UNSUPPORTED_VERSION", "UNSUPPORTED_VERSION")
        raise MemberFailed("kassign-demo-consumer-uniform-x", {"m1": failure})

    monkeypatch.setattr(cli, "_run_all", old_broker)
    code = cli.main(["--protocol", "consumer", "--bootstrap", "b:9092", "--out", str(tmp_path), "--no-plot"])
    assert code == EXIT_RUNTIME
    line = _one_line_error(capsys)
    assert "does not support the consumer group protocol (KIP-848)" in line and "b:9092" in line


def test_other_kip848_failures_name_the_member_and_error():
    from kassign.adapters.aiokafka.consumer_group_coordinator import GroupProtocolError

    exc = MemberFailed("g", {"m2": GroupProtocolError("too many members", "GROUP_MAX_SIZE_REACHED")})
    error = cli._group_protocol_failure(exc, "b:9092")
    assert error is not None and "member m2" in error.what and "GROUP_MAX_SIZE_REACHED" in error.what
    assert cli._group_protocol_failure(MemberFailed("g", {"m1": RuntimeError("boom")}), "b") is None
    assert cli._group_protocol_failure(ValueError("x"), "b") is None


def test_the_summary_carries_the_protocol_and_the_brokers_group_type():
    classic = dataclasses.replace(_run(), label="classic-eager", title="eager", broker_group_type="classic")
    kip848 = dataclasses.replace(
        _run(),
        label="consumer-uniform",
        title="kassign KIP-848",
        group_protocol="consumer",
        broker_group_type="consumer",
    )
    data = summary_json([classic, kip848])
    assert data["consumer-uniform"]["group_protocol"] == "consumer"
    assert data["consumer-uniform"]["broker_group_type"] == "consumer"
    assert data["classic-eager"]["group_protocol"] == "classic"
    text = format_table([classic, kip848])
    assert "kassign KIP-848 consumer (the broker's description; members spoke consumer)" in text
    assert "group type" not in format_table([_run()])  # not asked: no such line (the classic demo)


def test_integration_reuses_the_packages_group_config():
    from integration import group_config as shim

    assert shim.set_consumer_group_timing is group_config.set_consumer_group_timing


def test_no_answer_is_not_called_a_refusal(monkeypatch):
    pytest.importorskip("confluent_kafka")
    from confluent_kafka import KafkaError

    monkeypatch.setattr(group_config, "_admin", lambda bootstrap: refusing_admin(KafkaError._TIMED_OUT, "Timed out"))
    with pytest.raises(group_config.GroupConfigError) as caught:
        group_config.set_consumer_group_timing("b:9092", "g", session_ms=1500, heartbeat_ms=250)
    assert not isinstance(caught.value, group_config.GroupTimingRefused)
    with pytest.raises(CLIError, match="failed .Timed out") as error:
        cli._configure_group("b:9092", "g", 1500, 250)
    assert "4.0" not in f"{error.value.what} {error.value.todo}"
