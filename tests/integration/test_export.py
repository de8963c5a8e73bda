"""Reading a topic straight from the store (martlet.connectors.arrow) and `martlet export` to
Parquet, against a live broker written to by librdkafka: committed records only, with Spark's
Kafka columns; exports go on where the last one stopped, and a run that died half way is
neither repeated nor lost."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from martlet.connectors.arrow import SCHEMA, open_store, read_topic, span_end
from martlet.connectors.export import export, open_target
from martlet.engine.api import LocalStore, stored_topic
from tests.fixtures.martlet import wait_until
from tests.integration.store_readers import PUBLISHED_S, new_topic, produce, published

pytestmark = pytest.mark.integration

HOUR_MS = 3_600_000
T0 = 1_795_824_000_000  # 2026-11-28 00:00 UTC





def read_parquet_tree(store: Any, topic: str) -> pa.Table:
    """Every Parquet file an export wrote under `topic` on `store`, as one table."""
    tables = []
    for partition in store.list(topic):
        for hour in store.list(f"{topic}/{partition}") if partition.startswith("partition=") else []:
            for name in store.list(f"{topic}/{partition}/{hour}"):
                path = f"{topic}/{partition}/{hour}/{name}"
                tables.append(pq.read_table(pa.BufferReader(store.read(path, 0, store.size(path)))))
    return pa.concat_tables(tables)


def test_read_topic_gives_committed_records_with_sparks_columns(martlet: Any) -> None:
    topic = new_topic(martlet.bootstrap, 2)
    plain = [{"partition": i % 2, "key": b"k%d" % i, "value": b"v%d" % i, "timestamp": T0 + i,
              "headers": [("h", b"x%d" % i)] if i % 3 == 0 else None} for i in range(10)]
    produce(martlet.bootstrap, topic, plain)
    produce(martlet.bootstrap, topic, [{"partition": 0, "key": b"gone", "value": b"aborted"}],
             transactional=f"tx-{topic}", commit=False)
    produce(martlet.bootstrap, topic, [{"partition": 0, "key": b"kept", "value": b"committed", "timestamp": T0}],
             transactional=f"tx-{topic}")
    published(martlet.data_dir, topic, {0: 9, 1: 5})  # partition 0: 5 records, aborted, marker, committed, marker
    table = read_topic(str(martlet.data_dir), topic)
    assert table.schema == SCHEMA
    rows = table.to_pylist()
    values = sorted(row["value"] for row in rows)
    assert values == sorted([b"v%d" % i for i in range(10)] + [b"committed"])  # no aborted record, no marker
    first = next(row for row in rows if row["value"] == b"v0")
    assert (first["key"], first["topic"], first["partition"], first["offset"], first["timestampType"]) == (
        b"k0", topic, 0, 0, 0)
    assert first["timestamp"].timestamp() * 1000 == T0 and first["headers"] == [{"key": "h", "value": b"x0"}]
    assert all(row["headers"] == [] for row in rows if row["value"] == b"v1")
    assert [row["offset"] for row in rows if row["partition"] == 1] == [0, 1, 2, 3, 4]
    assert read_topic(str(martlet.data_dir), topic, partitions=[1], start=2, end=4)["offset"].to_pylist() == [2, 3]


def test_export_writes_each_record_once_by_partition_and_hour_and_goes_on_where_it_stopped(
        martlet: Any, tmp_path: Path) -> None:
    topic = new_topic(martlet.bootstrap, 2)
    first = [{"partition": i % 2, "key": b"k%d" % i, "value": json.dumps({"n": i}).encode(),
              "timestamp": T0 + (i % 4) * HOUR_MS // 2} for i in range(40)]
    produce(martlet.bootstrap, topic, first)
    published(martlet.data_dir, topic, {0: 20, 1: 20})
    source, target = open_store(str(martlet.data_dir)), LocalStore(str(tmp_path / "out"))
    assert export(source, topic, target, values="json") == {0: 20, 1: 20}
    hours = sorted(p.name for p in (tmp_path / "out" / topic / "partition=0").iterdir())
    assert hours == ["hour=2026-11-28-00", "hour=2026-11-28-01"]
    assert export(source, topic, target, values="json") == {0: 0, 1: 0}  # nothing new

    second = [{"partition": 0, "key": b"later%d" % i, "value": json.dumps({"n": 100 + i}).encode(),
               "timestamp": T0} for i in range(5)]
    produce(martlet.bootstrap, topic, second)
    published(martlet.data_dir, topic, {0: 25})
    dead = tmp_path / "out" / topic / "partition=0" / "hour=2026-11-28-00" / "part-20-24.parquet"
    dead.write_bytes(b"a run that died before it saved its state")  # past the saved offset: redone
    assert export(source, topic, target, values="json") == {0: 5, 1: 0}

    table = ds.dataset(str(tmp_path / "out" / topic), format="parquet", partitioning="hive").to_table()
    got = sorted((row["partition"], row["offset"], row["value"]["n"]) for row in table.to_pylist())
    assert got == sorted([(i % 2, i // 2, i) for i in range(40)] + [(0, 20 + i, 100 + i) for i in range(5)])


def test_the_export_command(martlet: Any, tmp_path: Path) -> None:
    topic = new_topic(martlet.bootstrap, 1)
    produce(martlet.bootstrap, topic, [{"key": b"k", "value": "välue %d".encode() % i} for i in range(3)])
    published(martlet.data_dir, topic, {0: 3})
    out = tmp_path / "out"
    done = subprocess.run(["martlet", "export", topic, "--to", str(out), "--store", str(martlet.data_dir),
                           "--values", "utf8"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"exported 3 records of {topic}" in done.stdout
    table = ds.dataset(str(out / topic), format="parquet", partitioning="hive").to_table()
    assert sorted(table["value"].to_pylist()) == ["välue 0", "välue 1", "välue 2"]
    produce(martlet.bootstrap, topic, [{"value": b"not json"}])
    published(martlet.data_dir, topic, {0: 4})
    refused = subprocess.run(["martlet", "export", topic, "--to", str(out), "--store", str(martlet.data_dir),
                              "--values", "json"], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1
    assert refused.stderr.startswith("martlet export: the value at partition 0 offset 3 is not json")
    missing = subprocess.run(["martlet", "export", "no-such-topic", "--to", str(out), "--store",
                              str(martlet.data_dir)], capture_output=True, text=True, timeout=120)
    assert missing.returncode == 1 and "no topic 'no-such-topic'" in missing.stderr


@pytest.mark.java
def test_export_from_hdfs_to_hdfs_goes_as_far_as_the_store_shows(martlet_process: Any, reference_hdfs: Any) -> None:
    """On HDFS the block a broker is writing shows only once finished: an export of a live
    topic stops where the store stops and says so, and the next one, after the broker closed
    its files, goes on from there; nothing is written twice."""
    root = f"{reference_hdfs.url}/export-{uuid.uuid4().hex[:8]}"
    broker = martlet_process(extra_args=["--store", f"{root}/data"])
    topic = new_topic(broker.bootstrap, 1)
    produce(broker.bootstrap, topic, [{"key": b"k%d" % i, "value": b"v%d" % i} for i in range(30)])
    source = open_store(f"{root}/data")
    assert wait_until(lambda: span_end(source, stored_topic(source, topic), 0)[1] >= 30, PUBLISHED_S, 0.1)
    target = open_target(f"{root}/out")
    first = export(source, topic, target)[0]
    broker.stop()  # closes the segment: its last block is finished
    second = export(source, topic, target)[0]
    assert first + second == 30, (first, second)  # first is 0 while the broker holds the block open
    table = read_parquet_tree(target, topic)
    assert sorted(table["offset"].to_pylist()) == list(range(30))
