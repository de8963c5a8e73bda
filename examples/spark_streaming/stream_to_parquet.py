"""A Spark Structured Streaming job: a Martlet topic to Parquet files, exactly once.

Spark's own Kafka connector reads the topic through Martlet's Kafka gateway, or
`--source martlet` reads it straight from the broker's store (`format("martlet")`, no
broker on the data path). Either way the query keeps its offsets in the checkpoint folder:
stop it (Ctrl-C, or kill it) and start it again with the same folders, and it goes on where
it stopped, each record in the output once.

    python examples/spark_streaming/stream_to_parquet.py --bootstrap 127.0.0.1:9092 \
        --topic events --output /tmp/events --checkpoint /tmp/events-checkpoint

    # straight from the store of a broker started with --data-dir ./martlet-data
    python examples/spark_streaming/stream_to_parquet.py --source martlet --store ./martlet-data \
        --topic events --output /tmp/events --checkpoint /tmp/events-checkpoint

With `--available-now` it processes what the topic holds now and stops.
"""

from __future__ import annotations

import argparse

from pyspark.sql import SparkSession

KAFKA_CONNECTOR = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", choices=["kafka", "martlet"], default="kafka")
    parser.add_argument("--bootstrap", default="127.0.0.1:9092", help="the broker (--source kafka)")
    parser.add_argument("--store", default="martlet-data", help="the broker's data dir or hdfs:// store (--source martlet)")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--output", required=True, help="folder of the Parquet files")
    parser.add_argument("--checkpoint", required=True, help="folder of the query's checkpoint")
    parser.add_argument("--available-now", action="store_true", help="process what is there now, then stop")
    parser.add_argument("--jars", default="", help="Kafka connector jars (comma-separated) instead of resolving "
                                                   f"{KAFKA_CONNECTOR} from Maven Central")
    args = parser.parse_args()

    builder = SparkSession.builder.appName("martlet-stream-to-parquet").master("local[2]")
    if args.source == "kafka":
        builder = builder.config("spark.jars", args.jars) if args.jars else builder.config(
            "spark.jars.packages", KAFKA_CONNECTOR)
    spark = builder.config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")

    if args.source == "kafka":
        stream = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", args.bootstrap)
                  .option("subscribe", args.topic).option("startingOffsets", "earliest").load())
    else:
        from martlet.connectors.spark import register

        register(spark)
        stream = spark.readStream.format("martlet").option("store", args.store).option("topic", args.topic).load()

    rows = stream.selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "partition", "offset",
                             "timestamp")
    writer = (rows.writeStream.format("parquet").option("path", args.output)
              .option("checkpointLocation", args.checkpoint))
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    query = writer.start()
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    total = spark.read.parquet(args.output).count() if args.available_now else None
    if total is not None:
        print(f"{total} records in {args.output}")
    spark.stop()


if __name__ == "__main__":
    main()
