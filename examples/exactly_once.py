"""Consume, transform, produce, exactly once: Kafka transactions with confluent-kafka.

Reads an input topic as a consumer group member, writes one output record per input record,
and commits both the output and the group's input offsets in one transaction. Whatever
happens to this process (kill -9 included), a `read_committed` reader of the output sees each
input record's output exactly once: a transaction this process left open is aborted when the
next instance starts with the same transactional id (or at its timeout), and the next instance
resumes from the offsets the last committed transaction stored.

    python examples/exactly_once.py --bootstrap 127.0.0.1:9092 --input words --output shouted \
        --group shouter --transactional-id shouter-1

It prints `committed N` after each transaction (N: records so far in this run) and runs until
interrupted, or until it has been idle for --idle-exit-s seconds.
"""

from __future__ import annotations

import argparse
import sys
import time

from confluent_kafka import Consumer, KafkaException, Message, Producer, TopicPartition

POLL_S = 0.5
CALL_S = 30.0


def transform(value: bytes) -> bytes:
    return value.upper()


def positions(consumer: Consumer) -> list[TopicPartition]:
    """Where the consumer goes on from, for the partitions it has read from."""
    return [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]


def send_one_transaction(producer: Producer, consumer: Consumer, output: str, messages: list[Message]) -> None:
    producer.begin_transaction()
    for message in messages:
        if message.error() is not None:
            raise KafkaException(message.error())
        producer.produce(output, key=message.key(), value=transform(message.value() or b""))
    producer.send_offsets_to_transaction(positions(consumer), consumer.consumer_group_metadata(), CALL_S)
    producer.commit_transaction(CALL_S)


def run(options: argparse.Namespace) -> None:
    consumer = Consumer({"bootstrap.servers": options.bootstrap, "group.id": options.group,
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest", "session.timeout.ms": options.session_timeout_ms})
    producer = Producer({"bootstrap.servers": options.bootstrap, "transactional.id": options.transactional_id,
                         "transaction.timeout.ms": options.transaction_timeout_ms})
    producer.init_transactions(CALL_S)  # fences an earlier instance, aborting what it left open
    consumer.subscribe([options.input])
    done, idle_since = 0, time.monotonic()
    try:
        while options.idle_exit_s is None or time.monotonic() - idle_since < options.idle_exit_s:
            messages = consumer.consume(num_messages=options.batch, timeout=POLL_S)
            if not messages:
                continue
            send_one_transaction(producer, consumer, options.output, messages)
            done += len(messages)
            idle_since = time.monotonic()
            print(f"committed {done}", flush=True)
    finally:
        consumer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--transactional-id", required=True)
    parser.add_argument("--batch", type=int, default=100, help="at most this many records per transaction")
    parser.add_argument("--transaction-timeout-ms", type=int, default=60_000)
    parser.add_argument("--session-timeout-ms", type=int, default=45_000,
                        help="how long the group waits for a member that died before moving its partitions")
    parser.add_argument("--idle-exit-s", type=float, default=None, help="stop after this long with nothing to read")
    try:
        run(parser.parse_args(argv))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
