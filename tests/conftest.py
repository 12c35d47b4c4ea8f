"""Shared fixtures: the broker of the run, fresh group ids and fresh topics.

The broker is chosen by :func:`kassign.broker.open_broker` (``KAFKA_BOOTSTRAP_SERVERS``, then Apache
Kafka from Maven Central's jars, then testcontainers, then embedded Tansu; ``KASSIGN_BROKER`` forces
one), started at most once per session and only when a test asks for it. A few tests also ask for
``tansu_broker`` to keep the zero-Java path working. The pytest header says which broker will be
used, the terminal summary which ones were.

Tests of the consumer group protocol (KIP-848) carry the ``consumer_protocol`` marker, and tests of
behaviour both group protocols share take the ``group_protocol`` fixture (ids ``classic`` and
``consumer``, marked ``both_protocols``; the consumer variants also ``consumer_protocol``). On a
broker without the consumer group protocol (Kafka before 4.0, probed once per session with
ApiVersions) those are skipped with a one-line reason naming the broker; ``KASSIGN_KAFKA_VERSION``
picks the Kafka version the session starts (e.g. ``3.9.1``).

Tests of behaviour every supported Kafka shares on the classic protocol (groups, cooperative rounds,
static membership, mixed Java/librdkafka groups, the eager-to-cooperative upgrade), listed in
:data:`VERSION_MATRIX`, carry the ``version_matrix`` marker: CI re-runs them on Kafka 3.9 and 3.3 with
``-m "version_matrix and not consumer_protocol"``. Tests marked with one of :data:`OPT_IN_MARKERS`
(the start-up of every tested Kafka version, the secured brokers) run only when asked for: when
``-m`` names the marker, or their file is named on the command line; CI gives each its own tier.

The summary also names any ``kassign-*`` directory the session left in the temporary directory
(a group's logs are kept only when its test failed). With ``KASSIGN_STRICT_TMP=1`` (set by .ci/run,
whose machine runs nothing else) such a leftover fails an otherwise passing run; elsewhere other
processes may be making their own, so it is only reported.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# `integration` lives at the repository root next to `kassign`, outside the installed package.
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from kassign.broker import (  # noqa: E402
    BrokerInfo,
    BrokerUnavailable,
    open_broker,
    planned_broker,
    replicated_settings,
    start_kafka,
    start_tansu,
)
from kassign.broker.probe import consumer_group_protocol_missing  # noqa: E402

#: The values of ``group_protocol`` a both-protocols test runs with (Java's ``group.protocol`` names).
GROUP_PROTOCOLS = ("classic", "consumer")

#: The broker tests CI re-runs on older Kafka lines (marked ``version_matrix``): a file, or file::test.
VERSION_MATRIX = (
    "tests/integration/test_groups.py",  # groups of every client and assignor, mixed Java/librdkafka groups
    "tests/integration/test_aiokafka_cooperative.py",  # cooperative rounds, mixed groups, crashes between rounds
    "tests/integration/test_aiokafka_realkafka.py",  # the eager-to-cooperative upgrade, static member fencing
    "tests/integration/test_both_protocols.py",  # shared behaviour, static member restart (classic variants)
    # commits during a classic round: what the broker accepts while preparing or completing a rebalance
    "tests/integration/test_commits_during_rebalance.py",
    "tests/integration/test_classic_member_rules.py::test_a_static_member_replaced_during_its_join_is_fenced",
    "tests/integration/test_classic_member_rules.py::test_a_member_closed_during_its_first_join_leaves",
)

#: Markers of tests that run only when selected (``-m`` naming the marker, or the file named): each is
#: its own CI tier, outside the README's tier-1 command.
OPT_IN_MARKERS = ("kafka_versions", "security")

try:
    from hypothesis import settings as _hypothesis_settings

    # The suite's property tests and fuzzers are seeded (the same examples every run), so CI is
    # repeatable; HYPOTHESIS_PROFILE=explore searches new examples (and replays saved failures).
    _hypothesis_settings.register_profile("seeded", derandomize=True, database=None)
    _hypothesis_settings.register_profile("explore", derandomize=False)
    _hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "seeded"))
except ImportError:  # hypothesis is a test extra; tests that need it import it themselves
    pass

_BROKERS_USED = pytest.StashKey[list[BrokerInfo]]()
_TMP_BEFORE = pytest.StashKey[set[str]]()
_TMP_LEFT = pytest.StashKey[list[str]]()


def _kassign_tmp_dirs() -> set[str]:
    """Directories named ``kassign-*`` in the temporary directory (not the broker lock file)."""
    return {str(p) for p in Path(tempfile.gettempdir()).glob("kassign-*") if p.is_dir()}


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_TMP_BEFORE] = _kassign_tmp_dirs()


@pytest.hookimpl(trylast=True)  # after the session fixtures' teardown (the session broker's work directory)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before = session.config.stash.get(_TMP_BEFORE, None)
    if before is None:
        return
    left = sorted(_kassign_tmp_dirs() - before)
    session.config.stash[_TMP_LEFT] = left
    if left and exitstatus == pytest.ExitCode.OK and os.environ.get("KASSIGN_STRICT_TMP") == "1":
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_report_header(config: pytest.Config) -> str:
    return f"kafka broker: {planned_broker()}"


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    used = config.stash.get(_BROKERS_USED, [])
    if not used:
        terminalreporter.write_line("kafka broker used: none started (no broker test ran)")
    for info in used:
        terminalreporter.write_line(f"kafka broker used: {info.describe()}")
    left = config.stash.get(_TMP_LEFT, [])
    if left:
        strict = os.environ.get("KASSIGN_STRICT_TMP") == "1"
        terminalreporter.write_line(
            f"{len(left)} new kassign-* temporary director{'y' if len(left) == 1 else 'ies'} after the session"
            f"{' (a failure under KASSIGN_STRICT_TMP=1)' if strict else ''}: "
            + ", ".join(left[:5])
            + (" ..." if len(left) > 5 else ""),
            red=strict,
            yellow=not strict,
        )


def _in_version_matrix(nodeid: str) -> bool:
    test = nodeid.split("[", 1)[0]
    return any(test == entry or test.startswith(entry + "::") for entry in VERSION_MATRIX)


def _named_files(config: pytest.Config) -> set[Path]:
    """The test files named on the command line (``path`` or ``path::test``; not directories)."""
    named = set()
    for arg in config.args:
        path = Path(arg.split("::", 1)[0])
        if path.suffix == ".py":
            named.add(path.resolve())
    return named


def _deselect_opt_in(config: pytest.Config, items: list[pytest.Item]) -> None:
    expression = config.getoption("markexpr", "") or ""
    wanted = {marker for marker in OPT_IN_MARKERS if re.search(rf"\b{marker}\b", expression)}
    named = _named_files(config)
    keep, drop = [], []
    for item in items:
        opt_in = {marker for marker in OPT_IN_MARKERS if item.get_closest_marker(marker) is not None}
        (drop if opt_in and not (opt_in & wanted) and Path(item.path).resolve() not in named else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


#: Besides the KIP-848 and packaging tests, what CI runs in its second tier, out of the README's test
#: command (which must stay under 15 minutes; it took 13:56 here with these two last in it): the churn
#: soak's broker sequences, the 3-broker rack-aware cluster, the Tansu tier (each starts brokers of its
#: own), lint and types, the docs build, the report's rendering in a headless browser and the
#: simulator's calibration against the recorded runs (about 70 s between them).
_SECOND_TIER = (
    "tests/integration/test_churn_soak.py::test_churn_sequence_keeps_ownership_exclusive_and_loses_nothing",
    "tests/integration/test_rack_aware_cluster.py",
    "tests/integration/test_tansu_tier.py",
    "tests/test_lint_and_types.py",
    "tests/docs/test_docs_build.py",
    "tests/spark/test_report_browser.py",
    "tests/sim/test_bench_calibration.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Anything that reaches the broker carries the `broker` marker, so `-m "not broker"` leaves it out.
    # A test run on both group protocols carries `both_protocols`, its consumer variant also
    # `consumer_protocol`, so a tier can select either protocol's variants with -m.
    _deselect_opt_in(config, items)
    for item in items:
        if _in_version_matrix(item.nodeid):
            item.add_marker(pytest.mark.version_matrix)
        if "kafka_broker" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.broker)
        protocol = getattr(getattr(item, "callspec", None), "params", {}).get("group_protocol")
        if protocol is not None:
            item.add_marker(pytest.mark.both_protocols)
            if protocol == "consumer":
                item.add_marker(pytest.mark.consumer_protocol)
        if (
            item.get_closest_marker("consumer_protocol")
            or item.get_closest_marker("packaging")
            or item.nodeid.startswith(_SECOND_TIER)
        ):
            item.add_marker(pytest.mark.tier2)


@pytest.fixture(scope="session")
def kafka_broker(pytestconfig: pytest.Config) -> Iterator[BrokerInfo]:
    """The session's broker (started on first use, stopped at the end of the session)."""
    with open_broker() as info:
        pytestconfig.stash.setdefault(_BROKERS_USED, []).append(info)
        yield info


@pytest.fixture(scope="module")
def rack_cluster(pytestconfig: pytest.Config, kafka_broker: BrokerInfo) -> Iterator[BrokerInfo]:
    """Three Apache Kafka brokers on racks r1, r2, r3 (one controller), for rack-aware assignment."""
    if kafka_broker.kind != "kafka":
        pytest.skip(
            f"a local multi-broker cluster needs Apache Kafka from jars; the session broker is {kafka_broker.kind}"
        )
    with start_kafka(version=kafka_broker.version, brokers=3, racks=("r1", "r2", "r3")) as info:
        pytestconfig.stash.setdefault(_BROKERS_USED, []).append(info)
        yield info


@pytest.fixture(scope="module")
def replicated_cluster(pytestconfig: pytest.Config, kafka_broker: BrokerInfo) -> Iterator[BrokerInfo]:
    """Three Apache Kafka nodes, each a broker and a controller, with internal and new topics replicated
    three times (min.insync.replicas 2): a cluster that survives the loss of any node (coordinator
    failover); its handle kills and restarts nodes."""
    if kafka_broker.kind != "kafka":
        pytest.skip(
            f"a local multi-broker cluster needs Apache Kafka from jars; the session broker is {kafka_broker.kind}"
        )
    with start_kafka(version=kafka_broker.version, brokers=3, controllers=3, settings=replicated_settings(3)) as info:
        pytestconfig.stash.setdefault(_BROKERS_USED, []).append(info)
        yield info


def _broker_name(info: BrokerInfo) -> str:
    """The broker in a few words, its version first: ``Apache Kafka 3.9.1 at 127.0.0.1:9092``."""
    name = {"kafka": "Apache Kafka", "testcontainers": "Apache Kafka", "tansu": "Tansu"}.get(info.kind, "the broker")
    return f"{name} {info.version}".strip() + f" at {info.bootstrap}"


@pytest.fixture(scope="session")
def consumer_protocol_missing(kafka_broker: BrokerInfo) -> str | None:
    """None when the session broker speaks the consumer group protocol (KIP-848), else the one-line
    reason naming the broker: asked once per session (ApiVersions), not once per test."""
    if not kafka_broker.is_real_kafka:
        return f"{_broker_name(kafka_broker)} has no consumer group protocol (KIP-848)"
    try:
        missing = consumer_group_protocol_missing(kafka_broker.bootstrap)
    except BrokerUnavailable as exc:  # a broker that does not answer is a failure, not a reason to skip
        pytest.fail(f"could not ask {_broker_name(kafka_broker)} for its API versions: {exc}")
    return None if missing is None else f"{_broker_name(kafka_broker)} has {missing}"


def _skip_without_consumer_protocol(request: pytest.FixtureRequest) -> None:
    missing = request.getfixturevalue("consumer_protocol_missing")
    if missing is not None:
        pytest.skip(missing)


@pytest.fixture(autouse=True)
def _consumer_protocol_only(request: pytest.FixtureRequest) -> None:
    """Skip tests marked ``consumer_protocol`` (and the consumer variants of both-protocol tests) on a
    broker without the consumer group protocol, with the reason; CI's Kafka 4.4 has it, so there they run."""
    if request.node.get_closest_marker("consumer_protocol") is not None:
        _skip_without_consumer_protocol(request)


@pytest.fixture(params=GROUP_PROTOCOLS)
def group_protocol(request: pytest.FixtureRequest) -> str:
    """The group protocol a both-protocols test runs with: ``"classic"`` (KIP-429 on JoinGroup/SyncGroup)
    or ``"consumer"`` (KIP-848, where the broker assigns)."""
    if request.param == "consumer":
        _skip_without_consumer_protocol(request)
    return request.param


@pytest.fixture(scope="session")
def tansu_broker(pytestconfig: pytest.Config) -> Iterator[BrokerInfo]:
    """The embedded Tansu broker (the zero-Java fallback), for the few tests that keep that path working."""
    with start_tansu() as info:
        pytestconfig.stash.setdefault(_BROKERS_USED, []).append(info)
        yield info


@pytest.fixture(scope="session")
def bootstrap_servers(kafka_broker: BrokerInfo) -> str:
    """The session broker's bootstrap address list."""
    return kafka_broker.bootstrap


@pytest.fixture(autouse=True)
def _realkafka_only(request: pytest.FixtureRequest) -> None:
    """Skip tests marked ``realkafka`` when the session fell back to Tansu (no protocol voting, no static
    membership). CI forces Apache Kafka (``KASSIGN_BROKER=kafka``), so there they always run."""
    if request.node.get_closest_marker("realkafka") is None:
        return
    info: BrokerInfo = request.getfixturevalue("kafka_broker")
    if not info.is_real_kafka:
        pytest.skip("needs Apache Kafka (protocol voting / static membership); the broker is Tansu")


def _slug(text: str, limit: int = 40) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:limit]


@pytest.fixture
def group_id(request: pytest.FixtureRequest) -> str:
    """A consumer group id no other test (or earlier run) uses, so no test sees another's offsets."""
    return f"g-{_slug(request.node.name)}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def topic_factory(bootstrap_servers: str, request: pytest.FixtureRequest) -> Callable[..., str]:
    """``make(partitions, name=None) -> topic``: creates a fresh topic and waits until it is led."""
    from integration.topics import create_topic

    def make(partitions: int, name: str | None = None) -> str:
        topic = name or f"t-{_slug(request.node.name, 30)}-{uuid.uuid4().hex[:8]}"
        return create_topic(bootstrap_servers, topic, partitions)

    return make
