"""Flink jobs against Martlet, run by PyFlink's own python (martlet.compat.reference.flink: a
virtualenv under .cache/, since PyFlink pins py4j, pyarrow and pandas the project cannot share).
This file imports nothing from Martlet or the tests: that python has neither.

    python flink_jobs.py run JOB_JSON   one job in this process; runs until killed
    python flink_jobs.py serve          a job server: job specs as JSON lines on stdin, one
                                        answer line each on stdout, in one JVM for all jobs

A spec is {"job": NAME, ...arguments}; the server also takes {"cancel": JOB_ID}. Each job
runs in a MiniCluster of its own (Flink's local executor), the Python functions in the JVM's
thread (pemja, no Python worker processes). Jobs:

- exactly_once: KafkaSource -> map -> KafkaSink with DeliveryGuarantee.EXACTLY_ONCE,
  checkpoints every CHECKPOINT_MS into "checkpoints", restored from "restore" if given;
- sql: a 'connector' = 'kafka' table read, its values upper-cased by SQL, and written to
  another 'connector' = 'kafka' table;
- discovery: KafkaSource with partition.discovery.interval.ms -> map -> KafkaSink (at least
  once), each value tagged so the test sees what was read.

Every socket is on 127.0.0.1. A job prints "submitted JOB_ID" once running (run mode).
"""

from __future__ import annotations

import json
import os
import sys
import sysconfig
from pathlib import Path
from typing import Any

from pyflink.common import Configuration, Types, WatermarkStrategy
from pyflink.common.serialization import SimpleStringSchema
from pyflink.datastream import CheckpointingMode, StreamExecutionEnvironment
from pyflink.datastream.connectors.base import DeliveryGuarantee
from pyflink.datastream.connectors.kafka import (
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
)
from pyflink.table import StreamTableEnvironment

CHECKPOINT_MS = 1000
TRANSACTION_TIMEOUT_MS = 600_000  # under Martlet's transaction.max.timeout.ms (1 h, as Kafka's 15 min allows too)
LOOPBACK = "127.0.0.1"


def configuration(spec: dict[str, Any]) -> Configuration:
    conf = Configuration()
    settings = {
        "pipeline.jars": Path(spec["jar"]).as_uri(),
        "parallelism.default": str(spec.get("parallelism", 2)),
        "python.execution-mode": "thread",
        "python.executable": sys.executable,
        "python.client.executable": sys.executable,
        "rest.address": LOOPBACK,
        "rest.bind-address": LOOPBACK,
        "rest.bind-port": "0",
        "jobmanager.rpc.address": LOOPBACK,
        "jobmanager.bind-host": LOOPBACK,
        "taskmanager.host": LOOPBACK,
        "taskmanager.bind-host": LOOPBACK,
        "blob.server.port": "0",
        "taskmanager.memory.network.min": "64mb",
        "taskmanager.memory.network.max": "64mb",
    }
    if "checkpoints" in spec:
        settings.update({
            "execution.checkpointing.interval": f"{CHECKPOINT_MS} ms",
            "execution.checkpointing.mode": "EXACTLY_ONCE",
            "execution.checkpointing.dir": Path(spec["checkpoints"]).as_uri(),
            "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
            "execution.checkpointing.num-retained": "2",
        })
    if spec.get("restore"):
        settings["execution.state-recovery.path"] = Path(spec["restore"]).as_uri()
    for key, value in settings.items():
        conf.set_string(key, value)
    return conf


def kafka_source(spec: dict[str, Any], **properties: str) -> KafkaSource:
    builder = (KafkaSource.builder().set_bootstrap_servers(spec["bootstrap"]).set_topics(spec["source"])
               .set_group_id(spec["group"]).set_starting_offsets(KafkaOffsetsInitializer.earliest())
               .set_value_only_deserializer(SimpleStringSchema()))
    for key, value in properties.items():
        builder = builder.set_property(key, value)
    return builder.build()


def kafka_sink(spec: dict[str, Any], guarantee: DeliveryGuarantee) -> KafkaSink:
    serializer = (KafkaRecordSerializationSchema.builder().set_topic(spec["sink"])
                  .set_value_serialization_schema(SimpleStringSchema()).build())
    builder = (KafkaSink.builder().set_bootstrap_servers(spec["bootstrap"]).set_record_serializer(serializer)
               .set_delivery_guarantee(guarantee))
    if guarantee == DeliveryGuarantee.EXACTLY_ONCE:
        builder = (builder.set_transactional_id_prefix(spec["transactional_id_prefix"])
                   .set_property("transaction.timeout.ms", str(TRANSACTION_TIMEOUT_MS)))
    return builder.build()


def exactly_once(spec: dict[str, Any]) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment(configuration(spec))
    env.enable_checkpointing(CHECKPOINT_MS, CheckpointingMode.EXACTLY_ONCE)
    stream = env.from_source(kafka_source(spec), WatermarkStrategy.no_watermarks(), "martlet-source")
    stream = stream.map(lambda value: f"{value}|flink", output_type=Types.STRING())
    stream.sink_to(kafka_sink(spec, DeliveryGuarantee.EXACTLY_ONCE))
    return env


def discovery(spec: dict[str, Any]) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment(configuration(spec))
    source = kafka_source(spec, **{"partition.discovery.interval.ms": str(spec["discovery_ms"])})
    stream = env.from_source(source, WatermarkStrategy.no_watermarks(), "martlet-source")
    stream = stream.map(lambda value: f"{value}|seen", output_type=Types.STRING())
    stream.sink_to(kafka_sink(spec, DeliveryGuarantee.AT_LEAST_ONCE))
    return env


def sql(spec: dict[str, Any]) -> Any:
    """The INSERT's TableResult (its job runs asynchronously)."""
    env = StreamExecutionEnvironment.get_execution_environment(configuration(spec))
    tables = StreamTableEnvironment.create(env)
    common = f"'connector' = 'kafka', 'properties.bootstrap.servers' = '{spec['bootstrap']}'"
    for key, value in spec.get("kafka_properties", {}).items():  # security settings, Kafka's client names
        escaped = value.replace("'", "''")
        common += f", 'properties.{key}' = '{escaped}'"
    tables.execute_sql(f"""
        CREATE TABLE words (word STRING, n BIGINT, `partition` INT METADATA VIRTUAL, `offset` BIGINT METADATA VIRTUAL)
        WITH ({common}, 'topic' = '{spec['source']}', 'properties.group.id' = '{spec['group']}',
              'scan.startup.mode' = 'earliest-offset', 'format' = 'json')""")
    tables.execute_sql(f"""
        CREATE TABLE shouted (word STRING, n BIGINT, src STRING)
        WITH ({common}, 'topic' = '{spec['sink']}', 'format' = 'json', 'sink.delivery-guarantee' = 'at-least-once')""")
    return tables.execute_sql("""
        INSERT INTO shouted
        SELECT UPPER(word), n * 10, CONCAT(CAST(`partition` AS STRING), ':', CAST(`offset` AS STRING))
        FROM words WHERE n >= 0""")


def submit(spec: dict[str, Any]) -> Any:
    """Start the job named in `spec`; its JobClient."""
    if spec["job"] == "sql":
        return sql(spec).get_job_client()
    build = {"exactly_once": exactly_once, "discovery": discovery}[spec["job"]]
    return build(spec).execute_async(f"martlet-{spec['job']}")


def answer(message: dict[str, Any]) -> None:
    print(json.dumps(message), flush=True)


def serve() -> None:
    """Job specs in, one answer line each out, until stdin closes; jobs left are cancelled."""
    jobs: dict[str, Any] = {}
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if "cancel" in request:
                jobs.pop(request["cancel"]).cancel().result()
                answer({"cancelled": request["cancel"]})
            else:
                client = submit(request)
                job_id = str(client.get_job_id())
                jobs[job_id] = client
                answer({"submitted": job_id})
        except Exception as error:  # the test shows it; the server goes on
            answer({"error": f"{type(error).__name__}: {error}"})
    for client in jobs.values():
        client.cancel().result()


def run(spec: dict[str, Any]) -> None:
    client = submit(spec)
    print(f"submitted {client.get_job_id()}", flush=True)
    client.get_job_execution_result().result()


def main() -> None:
    # The JVM (started below, on the first call into PyFlink) runs Python functions in an
    # embedded interpreter, which sees the base python's paths, not this virtualenv's.
    os.environ["PYTHONPATH"] = sysconfig.get_paths()["purelib"]
    if sys.argv[1] == "serve":
        serve()
    else:
        run(json.loads(sys.argv[2]))


if __name__ == "__main__":
    main()
