"""The PySpark side of ``kassign sweep`` and ``kassign analyze``.

Scenario specs (or recorded groups) are spread over the executors, each task runs
:func:`kassign.spark.tasks.run_spec` (or :func:`~kassign.spark.tasks.measure_group`), and the
phase rows and event rows come back as DataFrames that are written as Parquet and aggregated
per broker, client, assignor, protocol and phase kind. Progress is shown by polling Spark's
status tracker from a side thread into a tqdm bar.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from kassign.spark.tasks import LABEL_FIELDS, METRIC_FIELDS, measure_group, run_spec

__all__ = [
    "spark_session",
    "SweepOutput",
    "run_sweep",
    "run_analysis",
    "aggregate",
    "PHASE_SCHEMA",
    "EVENT_SCHEMA",
    "GROUP_KEYS",
]

log = logging.getLogger(__name__)

_TYPES = {
    "scenario_id": LongType(),
    "members": LongType(),
    "partitions": LongType(),
    "seed": LongType(),
    "settled": BooleanType(),
    "sim_ms": DoubleType(),
    "moved": LongType(),
    "unowned_parts": LongType(),
    "kept": LongType(),
    "rounds": LongType(),
    "balance": LongType(),
    "revoke_callbacks": LongType(),
    "assign_callbacks": LongType(),
}
PHASE_SCHEMA = StructType(
    [
        StructField(f, _TYPES.get(f, DoubleType() if f in METRIC_FIELDS else StringType()), False)
        for f in LABEL_FIELDS + METRIC_FIELDS
    ]
)
EVENT_SCHEMA = StructType(
    [
        StructField("scenario_id", LongType(), False),
        StructField("member", StringType(), False),
        StructField("t", DoubleType(), False),
        StructField("ev", StringType(), False),
        StructField("parts", ArrayType(StringType()), True),
        StructField("extra", StringType(), True),
    ]
)
#: What the aggregates are grouped by.
GROUP_KEYS = ("broker", "client", "assignor", "protocol", "kind")


#: A Spark configuration directory whose log4j2.properties keeps Spark's JVM to errors (its start-up
#: warnings are noise to a user).
QUIET_CONF_DIR = Path(__file__).with_name("quiet-conf")


def spark_session(master: str = "local[*]", app_name: str = "kassign", *, quiet: bool = False) -> SparkSession:
    """A SparkSession on ``master`` whose Python workers use this interpreter (so kassign imports).

    ``quiet``: the JVM logs errors only (no start-up warnings), unless ``SPARK_CONF_DIR`` names the
    user's own configuration; it applies when this call starts the JVM, not to a running session.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
    )
    if quiet and "SPARK_CONF_DIR" not in os.environ:
        os.environ["SPARK_CONF_DIR"] = str(QUIET_CONF_DIR)
        try:
            return builder.getOrCreate()
        finally:
            del os.environ["SPARK_CONF_DIR"]
    return builder.getOrCreate()


@contextmanager
def _progress(spark: SparkSession, group: str, description: str, enabled: bool) -> Iterator[None]:
    """Poll the status tracker for the tasks of job group ``group`` and show them in tqdm."""
    sc = spark.sparkContext
    sc.setJobGroup(group, description)
    stop = threading.Event()

    def poll() -> None:
        from tqdm import tqdm

        tracker = sc.statusTracker()
        with tqdm(total=0, desc=description, unit="task", disable=not enabled, leave=False) as bar:
            while not stop.wait(0.5):
                done = total = 0
                for job in tracker.getJobIdsForGroup(group):
                    info = tracker.getJobInfo(job)
                    for stage in info.stageIds if info else ():
                        s = tracker.getStageInfo(stage)
                        if s is not None:
                            done, total = done + s.numCompletedTasks, total + s.numTasks
                if total:
                    bar.total = total
                    bar.n = done
                    bar.refresh()

    thread = threading.Thread(target=poll, name="kassign-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]  # None clears it


@dataclass
class SweepOutput:
    """What a sweep or analysis produced: the phase rows (collected), the aggregates, timings."""

    phases: DataFrame
    phase_rows: list[dict[str, Any]]
    aggregates: list[dict[str, Any]]
    scenarios: int
    wall_s: float
    task_s: float  # summed wall time of the tasks' simulations


def _run(
    spark: SparkSession,
    items: Sequence[Any],
    work: Callable[[Any], tuple[list, list]],
    out: Path | None,
    *,
    with_events: bool,
    progress: bool,
    label: str,
    slices: int | None,
) -> SweepOutput:
    sc = spark.sparkContext
    started = time.perf_counter()
    n = max(1, min(len(items), slices or sc.defaultParallelism * 4))
    results = sc.parallelize(list(items), n).map(work).persist(StorageLevel.MEMORY_AND_DISK)
    with _progress(spark, f"kassign-{label}", f"{label} {len(items)}", progress):
        results.count()
    phases = spark.createDataFrame(results.flatMap(lambda r: r[0]).map(_phase_tuple), PHASE_SCHEMA)
    if out is not None:
        phases.write.mode("overwrite").parquet(str(out / "phases"))
        if with_events:
            events = spark.createDataFrame(results.flatMap(lambda r: r[1]).map(_event_tuple), EVENT_SCHEMA)
            events.write.mode("overwrite").parquet(str(out / "events"))
    grouped = aggregate(phases)
    if out is not None:
        grouped.write.mode("overwrite").parquet(str(out / "aggregates"))
    aggregates = [r.asDict() for r in grouped.collect()]
    phase_rows = [r.asDict() for r in phases.collect()]
    results.unpersist()
    wall = time.perf_counter() - started
    task_s = sum(r["sim_ms"] for r in phase_rows if r["phase"] == "initial") / 1000
    log.info("%s of %d items: %.1f s wall, %.1f s inside the tasks' simulations", label, len(items), wall, task_s)
    return SweepOutput(phases, phase_rows, aggregates, len(items), wall, task_s)


def _phase_tuple(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row[f] for f in LABEL_FIELDS + METRIC_FIELDS)


def _event_tuple(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["scenario_id"], row["member"], row["t"], row["ev"], row["parts"], row["extra"])


def run_sweep(
    spark: SparkSession,
    specs: Sequence[dict[str, Any]],
    out: Path | None,
    *,
    with_events: bool = True,
    progress: bool = True,
    slices: int | None = None,
) -> SweepOutput:
    """Simulate every spec on the executors; write ``phases``/``events``/``aggregates`` Parquet under ``out``."""
    return _run(
        spark,
        specs,
        lambda spec: run_spec(spec, with_events=with_events),
        out,
        with_events=with_events,
        progress=progress,
        label="sweep",
        slices=slices,
    )


def run_analysis(
    spark: SparkSession,
    groups: Sequence[Sequence[str]],
    out: Path | None,
    *,
    quiet_s: float = 2.0,
    with_events: bool = True,
    progress: bool = True,
) -> SweepOutput:
    """Measure every recorded group (a list of member files each) on the executors."""
    items = list(enumerate(groups))
    return _run(
        spark,
        items,
        lambda item: measure_group(item[0], item[1], quiet_s=quiet_s, with_events=with_events),
        out,
        with_events=with_events,
        progress=progress,
        label="analyze",
        slices=len(items),
    )


def aggregate(phases: DataFrame) -> DataFrame:
    """Per broker, client, assignor, protocol and phase kind (``initial`` phases left out): count,
    mean, median, p95 and max of the ownership gap, movement and settle time, balance, rounds."""
    stats = [F.count(F.lit(1)).alias("n")]
    for col in ("unowned_ps", "settle_s", "moved", "rounds", "balance", "window_s", "gap_kept_s"):
        stats += [
            F.mean(col).alias(f"{col}_mean"),
            F.percentile_approx(col, 0.5, 100000).cast("double").alias(f"{col}_p50"),
            F.percentile_approx(col, 0.95, 100000).cast("double").alias(f"{col}_p95"),
            F.max(col).cast("double").alias(f"{col}_max"),
        ]
    stats += [
        F.max("double_owned_ps").alias("double_owned_ps_max"),
        F.sum(F.when(F.col("settled"), 0).otherwise(1)).alias("unsettled"),
    ]
    return phases.where(F.col("kind") != "initial").groupBy(*GROUP_KEYS).agg(*stats).orderBy(*GROUP_KEYS)
