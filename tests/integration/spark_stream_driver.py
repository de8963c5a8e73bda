"""A Structured Streaming driver run as its own process by test_spark_kafka, so the test can
kill it with SIGKILL mid-stream and start it again from its checkpoint.

    python -m tests.integration.spark_stream_driver BOOTSTRAP TOPIC OUTPUT CHECKPOINT WORK_DIR JARS

It reads TOPIC from the beginning through Spark's Kafka source, at most --per-trigger records
a micro-batch, and appends every record to a Parquet file sink at OUTPUT; it runs until
killed. Spark's own session settings come from tests.fixtures.spark.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tests.fixtures.spark import build_session

TRIGGER = "200 milliseconds"


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("bootstrap", "topic", "output", "checkpoint", "work_dir", "jars"):
        parser.add_argument(name)
    parser.add_argument("--per-trigger", type=int, default=100)
    args = parser.parse_args()
    session = build_session("martlet-stream-driver", args.jars.split(","), Path(args.work_dir))
    records = (session.readStream.format("kafka")
               .option("kafka.bootstrap.servers", args.bootstrap)
               .option("subscribe", args.topic)
               .option("startingOffsets", "earliest")
               .option("maxOffsetsPerTrigger", str(args.per_trigger))
               .load())
    query = (records.selectExpr("key", "value", "partition", "offset", "unix_millis(timestamp) AS timestamp_ms")
             .writeStream.format("parquet")
             .option("path", args.output)
             .option("checkpointLocation", args.checkpoint)
             .trigger(processingTime=TRIGGER)
             .start())
    print("started", flush=True)
    query.awaitTermination()


if __name__ == "__main__":
    main()
