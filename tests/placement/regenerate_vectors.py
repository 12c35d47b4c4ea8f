"""Regenerate kafka_vectors.jsonl: random placement cases answered by Kafka's own
AdminUtils.assignReplicasToBrokers (server-common), compiled from an Apache Kafka source tree.

    python tests/placement/regenerate_vectors.py /path/to/kafka   # a checkout, or a bare git dir

Not run by the test suite: the vectors it writes are checked in and read by test_kafka_vectors.py.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SOURCES = [
    "server-common/src/main/java/org/apache/kafka/admin/AdminUtils.java",
    "server-common/src/main/java/org/apache/kafka/admin/BrokerMetadata.java",
    "server-common/src/main/java/org/apache/kafka/server/common/AdminOperationException.java",
]


def _read_source(kafka: Path, path: str) -> str:
    if (kafka / path).exists():
        return (kafka / path).read_text()
    return subprocess.run(
        ["git", "--git-dir", str(kafka), "show", f"HEAD:{path}"], check=True, capture_output=True, text=True
    ).stdout


def random_cases(rng: random.Random, count: int) -> list[dict]:
    cases = []
    for _ in range(count):
        n = rng.randint(1, 12)
        ids = rng.sample(range(30), n)
        if rng.random() < 0.5:
            ids.sort()
        racked = rng.random() > 0.35
        rack_names = ["a", "b", "c", "d", "r1", "r2"][: rng.randint(1, 6)]
        brokers = [[b, rng.choice(rack_names) if racked else None] for b in ids]
        if racked and rng.random() < 0.05:
            brokers[0][1] = None  # racks on some brokers only: Kafka refuses
        cases.append(
            {
                "brokers": brokers,
                "partitions": rng.choice([0, rng.randint(1, 40)]) if rng.random() < 0.1 else rng.randint(1, 40),
                "replication_factor": rng.randint(0, n + 1) if rng.random() < 0.1 else rng.randint(1, n),
                "fixed_start_index": rng.choice([0, rng.randint(0, 3 * n)]),
                "start_partition_id": rng.choice([-1, 0, rng.randint(0, 50)]),
            }
        )
    return cases


def main(kafka_dir: str) -> int:
    sys.path.insert(0, str(ROOT))
    from kassign._java import kafka_classpath

    rng = random.Random(20261122)
    cases = random_cases(rng, 250)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp, "src")
        src.mkdir()
        for path in SOURCES:
            (src / Path(path).name).write_text(_read_source(Path(kafka_dir), path))
        (src / "PlacementOracle.java").write_text((ROOT / "java" / "PlacementOracle.java").read_text())
        cp = os.pathsep.join(kafka_classpath())
        subprocess.run(["javac", "-nowarn", "-d", tmp, "-cp", cp, *map(str, src.glob("*.java"))], check=True)
        lines = "".join(
            ",".join(f"{b}:{r or ''}" for b, r in c["brokers"])
            + f"\t{c['partitions']}\t{c['replication_factor']}\t{c['fixed_start_index']}\t{c['start_partition_id']}\n"
            for c in cases
        )
        out = subprocess.run(
            ["java", "-cp", os.pathsep.join([tmp, cp]), "PlacementOracle"],
            input=lines,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
    with open(HERE / "kafka_vectors.jsonl", "w", encoding="utf-8") as fh:
        for case, answer in zip(cases, out, strict=True):
            if answer.startswith("OK"):
                case["expected"] = {int(k): json.loads(v) for k, v in (item.split("=") for item in answer.split()[1:])}
            else:
                case["error"] = answer[4:]
            fh.write(json.dumps(case) + "\n")
    print(f"wrote {len(cases)} cases to {HERE / 'kafka_vectors.jsonl'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "/work/.mirror/apache+kafka/repo"))
