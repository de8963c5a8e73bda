"""A Flink job that reads a Martlet topic, upper-cases each value and writes it to another
topic exactly once: Flink's Kafka source and Kafka sink with DeliveryGuarantee.EXACTLY_ONCE,
a checkpoint every second. The sink writes each checkpoint's records in a Kafka transaction
and commits it once the checkpoint is complete, so a `read_committed` reader of the output
sees every input once, whatever kills the job: restart it from its last checkpoint
(`--restore`) and it goes on from there.

    python uppercase_job.py --jar flink-sql-connector-kafka-5.0.0-2.2.jar \
        --bootstrap 127.0.0.1:9092 --input words --output shouted --checkpoints /tmp/flink-checkpoints

With `--bounded` it reads what the input holds when it starts, commits, and ends.
"""

from __future__ import annotations

import argparse
import os
import sys
import sysconfig
from pathlib import Path

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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jar", required=True, help="flink-sql-connector-kafka-5.0.0-2.2.jar (Maven Central)")
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--checkpoints", required=True, help="folder of the job's checkpoints")
    parser.add_argument("--restore", help="a checkpoint to start from (CHECKPOINTS/<job id>/chk-N)")
    parser.add_argument("--bounded", action="store_true", help="read what the input holds now, then end")
    args = parser.parse_args()

    # The map below runs in an interpreter embedded in Flink's JVM (thread mode), which sees the
    # base python's packages, not a virtualenv's: point it at this python's.
    os.environ["PYTHONPATH"] = sysconfig.get_paths()["purelib"]
    conf = Configuration()
    settings = {"pipeline.jars": Path(args.jar).resolve().as_uri(), "parallelism.default": "2",
                "python.execution-mode": "thread", "python.executable": sys.executable,
                "execution.checkpointing.dir": Path(args.checkpoints).resolve().as_uri(),
                "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
                # a local MiniCluster: every socket on the loopback interface
                "rest.address": "127.0.0.1", "rest.bind-address": "127.0.0.1", "rest.bind-port": "0",
                "jobmanager.rpc.address": "127.0.0.1", "jobmanager.bind-host": "127.0.0.1",
                "taskmanager.host": "127.0.0.1", "taskmanager.bind-host": "127.0.0.1", "blob.server.port": "0"}
    if args.bounded:
        settings["restart-strategy.type"] = "none"  # a one-off run fails at once instead of retrying
    if args.restore:
        settings["execution.state-recovery.path"] = Path(args.restore).resolve().as_uri()
    for key, value in settings.items():
        conf.set_string(key, value)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.enable_checkpointing(1000, CheckpointingMode.EXACTLY_ONCE)

    source = (KafkaSource.builder().set_bootstrap_servers(args.bootstrap).set_topics(args.input)
              .set_group_id(f"uppercase-{args.input}").set_starting_offsets(KafkaOffsetsInitializer.earliest())
              .set_value_only_deserializer(SimpleStringSchema()))
    if args.bounded:
        source = source.set_bounded(KafkaOffsetsInitializer.latest())
    sink = (KafkaSink.builder().set_bootstrap_servers(args.bootstrap)
            .set_record_serializer(KafkaRecordSerializationSchema.builder().set_topic(args.output)
                                   .set_value_serialization_schema(SimpleStringSchema()).build())
            .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
            .set_transactional_id_prefix(f"uppercase-{args.output}")
            .set_property("transaction.timeout.ms", "600000")  # within the broker's 15 min default maximum
            .build())
    stream = env.from_source(source.build(), WatermarkStrategy.no_watermarks(), "martlet")
    stream.map(lambda value: value.upper(), output_type=Types.STRING()).sink_to(sink)
    env.execute("martlet-uppercase")
    print("done")


if __name__ == "__main__":
    main()
