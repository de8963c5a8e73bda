"""Produce and consume with confluent-kafka (librdkafka): create a topic, write ten keyed
records, read them back as a consumer group member, commit.

    python examples/quickstart/confluent_quickstart.py --bootstrap 127.0.0.1:9092
"""

from __future__ import annotations

import argparse
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

COUNT = 10


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default=f"quickstart-{uuid.uuid4().hex[:6]}")
    args = parser.parse_args()

    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    admin.create_topics([NewTopic(args.topic, num_partitions=3)])[args.topic].result(30)

    producer = Producer({"bootstrap.servers": args.bootstrap, "acks": "all"})
    for number in range(COUNT):
        producer.produce(args.topic, key=f"key-{number}", value=f"hello {number}")
    producer.flush(30)

    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": "quickstart",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([args.topic])
    got = 0
    while got < COUNT:
        message = consumer.poll(10)
        if message is None:
            raise SystemExit(f"only {got} of {COUNT} records arrived")
        if message.error():
            raise SystemExit(str(message.error()))
        print(f"partition {message.partition()} offset {message.offset()}: "
              f"{message.key().decode()} = {message.value().decode()}")
        got += 1
    consumer.commit(asynchronous=False)
    consumer.close()
    print(f"read {got} records")


if __name__ == "__main__":
    main()
