"""Produce and consume with aiokafka (asyncio): create a topic, write ten keyed records, read
them back as a consumer group member, commit.

    python examples/quickstart/aiokafka_quickstart.py --bootstrap 127.0.0.1:9092
"""

from __future__ import annotations

import argparse
import asyncio
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

COUNT = 10


async def main(bootstrap: str, topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    await admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
    await admin.close()

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    for number in range(COUNT):
        await producer.send_and_wait(topic, key=f"key-{number}".encode(), value=f"hello {number}".encode())
    await producer.stop()

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id="quickstart",
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    got = 0
    try:
        while got < COUNT:
            message = await asyncio.wait_for(consumer.getone(), timeout=10)
            print(f"partition {message.partition} offset {message.offset}: "
                  f"{message.key.decode()} = {message.value.decode()}")
            got += 1
        await consumer.commit()
    finally:
        await consumer.stop()
    print(f"read {got} records")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default=f"quickstart-{uuid.uuid4().hex[:6]}")
    args = parser.parse_args()
    asyncio.run(main(args.bootstrap, args.topic))
