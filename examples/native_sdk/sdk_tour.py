"""Martlet's native SDK in one run: create a topic (named by its resource name from then on),
write keyed messages with the asynchronous Producer (answered from the broker's memory, each
message known persisted once the checkpoint C covers it), read one partition with a
SimpleConsumer, and the whole topic as a consumer group member.

    python examples/native_sdk/sdk_tour.py --bootstrap 127.0.0.1:9092
"""

from __future__ import annotations

import argparse
import uuid

from martlet.client.admin import Admin
from martlet.client.consumer import Consumer
from martlet.client.message import Message
from martlet.client.producer import Producer
from martlet.client.simple_consumer import SimpleConsumer

COUNT = 1_000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default=f"sdk-tour-{uuid.uuid4().hex[:6]}")
    args = parser.parse_args()

    with Admin(args.bootstrap) as admin:
        topic = admin.create_topic(args.topic, 4)
        print(f"created {topic.resource_name} (V={topic.version})")
        for p in topic.partitions:
            print(f"  partition {p.index}: logical slots [{p.slot_start}, {p.slot_end}), S={p.session}")

    persisted: list[Message] = []
    with Producer(args.bootstrap, topic.resource_name, on_persisted=persisted.append) as producer:
        for number in range(COUNT):
            producer.send(f"reading {number}".encode(), key=f"sensor-{number % 10}".encode())
        producer.flush()  # every message is in the broker's memory
        producer.wait_persisted(30)  # ...and under C: on disk (or HDFS)
        checkpoints = [producer.checkpoint(p.index) for p in topic.partitions]
    print(f"wrote {COUNT} messages; {len(persisted)} persisted; C per partition: {checkpoints}")

    one = SimpleConsumer(args.bootstrap, args.topic, 0)
    first = one.fetch(one.earliest(), max_messages=3, timeout_s=5)
    one.close()
    print("partition 0 starts with: " + ", ".join(f"{m.key.decode()}={m.value.decode()}" for m in first if m.key
                                                  and m.value))

    consumer = Consumer(args.bootstrap, "sdk-tour", [args.topic], auto_commit=False)
    got = 0
    for _ in range(60):
        got += len(consumer.poll(1.0))
        if got >= COUNT:
            break
    consumer.commit()
    consumer.close()
    if got != COUNT:
        raise SystemExit(f"the group member read {got} of {COUNT} messages")
    print(f"the group member read {got} messages and committed")


if __name__ == "__main__":
    main()
