"""Produce and consume with kafka-python: create a topic, write ten keyed records, read them
back as a consumer group member, commit.

    python examples/quickstart/kafka_python_quickstart.py --bootstrap 127.0.0.1:9092
"""

from __future__ import annotations

import argparse
import uuid

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic

COUNT = 10


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default=f"quickstart-{uuid.uuid4().hex[:6]}")
    args = parser.parse_args()

    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap)
    admin.create_topics([NewTopic(args.topic, num_partitions=3, replication_factor=1)])
    admin.close()

    producer = KafkaProducer(bootstrap_servers=args.bootstrap, acks="all")
    for number in range(COUNT):
        producer.send(args.topic, key=f"key-{number}".encode(), value=f"hello {number}".encode())
    producer.flush(30)
    producer.close()

    consumer = KafkaConsumer(args.topic, bootstrap_servers=args.bootstrap, group_id="quickstart",
                             auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=10_000)
    got = 0
    for message in consumer:
        print(f"partition {message.partition} offset {message.offset}: "
              f"{message.key.decode()} = {message.value.decode()}")
        got += 1
        if got == COUNT:
            break
    if got < COUNT:
        raise SystemExit(f"only {got} of {COUNT} records arrived")
    consumer.commit()
    consumer.close()
    print(f"read {got} records")


if __name__ == "__main__":
    main()
