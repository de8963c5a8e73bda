"""Bad input over a real socket: hostile frames close only their own connection, with one log
line and nothing written; bad requests get the error codes Apache Kafka answers."""

from __future__ import annotations

import random
import socket
import struct
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_request_schema

from martlet.protocol.codec import build
from tests.fixtures.martlet import MartletProcess, wait_until
from tests.integration.raw_client import (
    RawClient,
    batch_of_size,
    decode_response,
    frame,
    is_closed,
    record_batch,
)

pytestmark = pytest.mark.integration

CLOSE_TIMEOUT_S = 5.0
LOG_TIMEOUT_S = 5.0
CLOSING_LINE = "closing connection"
LATEST = -1


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def request(api_key: int, version: int, body: dict[str, Any]) -> Any:
    return build(load_request_schema(api_key, version), body)


def raw_header(api_key: int, version: int, correlation_id: int = 1, client_id: bytes = b"raw") -> bytes:
    """A request header v1 (key, version, correlation id, int16-length client id)."""
    return struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id


# -- requests the tests repeat


def api_versions(client: RawClient) -> Any:
    return client.request(request(18, 3, {"client_software_name": "raw", "client_software_version": "1"}))


def metadata(client: RawClient, names: list[str] | None, auto_create: bool = False) -> Any:
    topics = None if names is None else [{"name": name} for name in names]
    return client.request(request(3, 12, {"topics": topics, "allow_auto_topic_creation": auto_create}))


def create_topics(client: RawClient, topics: list[dict[str, Any]]) -> list[Any]:
    topics = [{"num_partitions": 1, "replication_factor": 1} | t for t in topics]
    return list(client.request(request(19, 7, {"topics": topics, "timeout": 5000})).topics)


def create_topic(client: RawClient, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
    configs_list = [{"name": k, "value": v} for k, v in (configs or {}).items()]
    [result] = create_topics(client, [{"name": name, "num_partitions": partitions, "configs": configs_list}])
    assert result.error_code == 0, result


def produce(client: RawClient, topic: str, partition: int, batch: bytes) -> Any:
    body = {"acks": -1, "timeout": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]}
    return client.request(request(0, 9, body)).responses[0].partition_responses[0]


def high_watermark(client: RawClient, topic: str, partition: int = 0) -> int:
    body = {"replica_id": -1, "topics": [{"name": topic, "partitions": [
        {"partition_index": partition, "current_leader_epoch": -1, "timestamp": LATEST}]}]}
    result = client.request(request(2, 7, body)).topics[0].partitions[0]
    assert result.error_code == 0, result
    return result.offset


# -- hostile frames: closed, logged once, nothing written, others served


def disk_snapshot(data_dir: Path) -> dict[str, int]:
    return {str(p.relative_to(data_dir)): p.stat().st_size for p in sorted(data_dir.rglob("*")) if p.is_file()}


def closing_lines(process: MartletProcess) -> int:
    text = process.log_path.read_text(errors="replace") if process.log_path.exists() else ""
    return sum(CLOSING_LINE in line for line in text.splitlines())


def check_hostile(process: MartletProcess, misbehave: Callable[[socket.socket], None]) -> None:
    with RawClient(process.bootstrap) as bystander:
        assert api_versions(bystander).error_code == 0
        disk_before = disk_snapshot(process.data_dir)
        lines_before = closing_lines(process)
        with RawClient(process.bootstrap) as hostile:
            misbehave(hostile.sock)
            assert is_closed(hostile.sock, CLOSE_TIMEOUT_S), "the broker kept the connection open"
        wait_until(lambda: closing_lines(process) > lines_before, LOG_TIMEOUT_S)
        assert closing_lines(process) == lines_before + 1, process.log_tail(5)
        assert all(t.error_code == 0 for t in metadata(bystander, None).topics)
        assert api_versions(bystander).error_code == 0
        assert disk_snapshot(process.data_dir) == disk_before


def test_oversized_frame_closes_the_connection(martlet: MartletProcess) -> None:
    check_hostile(martlet, lambda sock: sock.sendall(struct.pack(">i", 200 * 1024 * 1024) + b"abcd"))


def test_truncated_frame_then_close_is_logged(martlet: MartletProcess) -> None:
    start = raw_header(3, 12) + b"\x00\x00"  # 15 of the 100 bytes the size prefix announces

    def truncate(sock: socket.socket) -> None:
        sock.sendall(struct.pack(">i", 100) + start)
        sock.shutdown(socket.SHUT_WR)  # then close our side: the broker sees EOF mid-frame

    check_hostile(martlet, truncate)


def test_garbage_bytes_close_the_connection(martlet: MartletProcess) -> None:
    garbage = random.Random(459).randbytes(64)
    assert struct.unpack_from(">h", garbage)[0] not in range(0, 100)  # not a key Martlet serves
    check_hostile(martlet, lambda sock: sock.sendall(frame(garbage)))


def test_unknown_api_key_closes_the_connection(martlet: MartletProcess) -> None:
    check_hostile(martlet, lambda sock: sock.sendall(frame(raw_header(999, 0) + b"\x00" * 8)))


def test_unsupported_version_of_a_known_api_closes_the_connection(martlet: MartletProcess) -> None:
    produce_v0 = raw_header(0, 0) + struct.pack(">hii", 1, 1000, 0)  # acks, timeout, no topics
    check_hostile(martlet, lambda sock: sock.sendall(frame(produce_v0)))


def test_a_protocol_error_is_logged_with_the_client_id_and_address(martlet: MartletProcess) -> None:
    client_id = unique("misbehaving-client").encode()
    with RawClient(martlet.bootstrap) as hostile:
        host, port = hostile.sock.getsockname()[:2]
        address = f"{host}:{port}"
        hostile.sock.sendall(frame(raw_header(999, 0, client_id=client_id) + b"\x00" * 8))
        assert is_closed(hostile.sock, CLOSE_TIMEOUT_S)

    def logged() -> list[str]:
        return [line for line in martlet.log_tail(200).splitlines() if client_id.decode() in line]

    wait_until(lambda: bool(logged()), LOG_TIMEOUT_S)
    assert len(logged()) == 1 and address in logged()[0] and "unknown api key 999" in logged()[0], logged()


# -- error codes


def test_api_versions_of_an_unknown_version_answers_v0_then_v3_works(martlet: MartletProcess) -> None:
    with RawClient(martlet.bootstrap) as client:
        # ApiVersions is flexible from v3, so v99 has request header v2: tagged fields after the
        # client id (Kafka closes the connection if they are missing), then any body at all
        client.send_bytes(frame(raw_header(18, 99, correlation_id=41) + b"\x00" + b"\x05arbitrary\x00body\xff"))
        header, answer = decode_response(client.read_frame(), 18, 0)
        assert header.correlation_id == 41
        assert answer.error_code == 35  # UNSUPPORTED_VERSION
        assert [(k.api_key, k.max_version) for k in answer.api_keys if k.api_key == 18] == [(18, 4)]
        again = api_versions(client)
        assert again.error_code == 0
        assert {k.api_key for k in again.api_keys} >= {0, 1, 2, 3, 18, 19}


def test_corrupt_crc_is_corrupt_message_and_appends_nothing(martlet: MartletProcess) -> None:
    topic = unique("crc")
    with RawClient(martlet.bootstrap) as client:
        create_topic(client, topic)
        assert produce(client, topic, 0, record_batch([b"good"])).error_code == 0
        corrupt = bytearray(record_batch([b"payload one", b"payload two"]))
        corrupt[-3] ^= 0x01  # a byte of the last record's value: after offset 21, so covered by the CRC
        result = produce(client, topic, 0, bytes(corrupt))
        assert result.error_code == 2  # CORRUPT_MESSAGE
        assert high_watermark(client, topic) == 1


def test_batch_over_max_message_bytes_is_message_too_large(martlet: MartletProcess) -> None:
    topic = unique("big")
    with RawClient(martlet.bootstrap) as client:
        create_topic(client, topic, configs={"max.message.bytes": "2000"})
        assert produce(client, topic, 0, batch_of_size(3000)).error_code == 10  # MESSAGE_TOO_LARGE
        assert high_watermark(client, topic) == 0
        assert produce(client, topic, 0, batch_of_size(1500)).error_code == 0


def test_create_topics_errors(martlet: MartletProcess) -> None:
    taken, rf, zero, config = unique("taken"), unique("rf"), unique("zero"), unique("cfg")
    with RawClient(martlet.bootstrap) as client:
        create_topic(client, taken)
        results = create_topics(client, [
            {"name": "bad name!"}, {"name": "a" * 250}, {"name": ".."}, {"name": taken},
            {"name": rf, "replication_factor": 3}, {"name": zero, "num_partitions": 0},
            {"name": config, "configs": [{"name": "no.such.config", "value": "1"}]}])
        assert [(r.name, r.error_code) for r in results] == [
            ("bad name!", 17), ("a" * 250, 17), ("..", 17),  # INVALID_TOPIC_EXCEPTION
            (taken, 36),  # TOPIC_ALREADY_EXISTS
            (rf, 38),  # INVALID_REPLICATION_FACTOR
            (zero, 37),  # INVALID_PARTITIONS
            (config, 40)]  # INVALID_CONFIG
        listed = {t.name for t in metadata(client, None).topics}
        assert taken in listed and not listed & {"bad name!", "..", rf, zero, config}


def test_produce_to_a_missing_topic_or_partition(martlet: MartletProcess) -> None:
    missing, present = unique("missing"), unique("present")
    with RawClient(martlet.bootstrap) as client:
        assert produce(client, missing, 0, record_batch([b"x"])).error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
        [answer] = metadata(client, [missing]).topics
        assert (answer.name, answer.error_code, answer.partitions) == (missing, 3, ())
        assert missing not in {t.name for t in metadata(client, None).topics}
        create_topic(client, present, partitions=2)
        assert produce(client, present, 2, record_batch([b"x"])).error_code == 3
        assert produce(client, present, 1, record_batch([b"x"])).error_code == 0


def test_fetch_beyond_the_high_watermark_is_offset_out_of_range(martlet: MartletProcess) -> None:
    topic = unique("fetch")
    with RawClient(martlet.bootstrap) as client:
        create_topic(client, topic)
        assert produce(client, topic, 0, record_batch([b"a", b"b"])).error_code == 0
        body = {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
                "topics": [{"topic": topic, "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 5, "last_fetched_epoch": -1,
                     "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}
        answer = client.request(request(1, 12, body))
        result = answer.responses[0].partitions[0]
        assert (result.error_code, result.high_watermark) == (1, -1)  # OFFSET_OUT_OF_RANGE, no offsets (Kafka's)


def test_idempotent_gap_and_resend(martlet: MartletProcess) -> None:
    topic = unique("idem")
    with RawClient(martlet.bootstrap) as client:
        create_topic(client, topic)
        init = client.request(request(22, 4, {"transactional_id": None, "transaction_timeout": 60_000,
                                              "producer_id": -1, "producer_epoch": -1}))
        assert init.error_code == 0 and init.producer_id >= 0
        pid, epoch = init.producer_id, init.producer_epoch
        assert produce(client, topic, 0, record_batch([b"plain"])).error_code == 0
        first = record_batch([b"s0", b"s1"], producer_id=pid, producer_epoch=epoch, base_sequence=0)
        stored = produce(client, topic, 0, first)
        assert (stored.error_code, stored.base_offset) == (0, 1)
        gap = record_batch([b"s5"], producer_id=pid, producer_epoch=epoch, base_sequence=5)
        assert produce(client, topic, 0, gap).error_code == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
        assert high_watermark(client, topic) == 3
        again = produce(client, topic, 0, first)
        assert (again.error_code, again.base_offset) == (0, 1)
        assert high_watermark(client, topic) == 3


def test_auto_create_from_the_config_file(tmp_path: Path, martlet_process: Callable[..., MartletProcess]) -> None:
    config = tmp_path / "martlet.toml"
    config.write_text("[gateway]\nauto_create_topics = true\ndefault_partitions = 2\n")
    process = martlet_process(extra_args=["--config", str(config)])
    with RawClient(process.bootstrap) as client:
        [created] = metadata(client, ["fresh-topic"], auto_create=True).topics
        assert (created.name, created.error_code, len(created.partitions)) == ("fresh-topic", 0, 2)
        assert [(t.name, len(t.partitions)) for t in metadata(client, None).topics if not t.is_internal] == [
            ("fresh-topic", 2)]
