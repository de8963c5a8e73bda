"""What a connection costs a broker and how many it takes (issue 50).

- 10,000 idle connections raise a broker's RSS by less than 100 MB, and it answers meanwhile:
  reads go into one chunk every connection shares, so an idle one holds no read buffer;
- max.connections.per.ip, set at run time as `kafka-configs --alter --entity-default` sets it
  (here through its overrides, for connections from 127.0.0.2, so the session's other clients
  on 127.0.0.1 are not counted): the connection over the limit is closed at once, unanswered,
  while the others keep working and a place freed is taken again; the same on the reference
  Apache Kafka;
- at max.connections a new connection waits, neither closed nor answered, until one ends, and
  a limit raised at run time lets the waiting ones in.
"""

from __future__ import annotations

import os
import resource
import socket
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.incremental_alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kio.schema.metadata.v12.request import MetadataRequest

from tests.fixtures.martlet import wait_until
from tests.integration.raw_client import RawClient, decode_response, encode_request

pytestmark = pytest.mark.integration

IDLE = 10_000
IDLE_RSS_MAX_MB = 100
OTHER_HOST = "127.0.0.2"  # loopback too: connections from it are counted apart from the session's
PER_IP = 3
BROKER, SET, DELETE = 4, 0, 1
OVERRIDES = "max.connections.per.ip.overrides"
ANSWER_S = 10.0


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.fixture
def many_files() -> Iterator[None]:
    """This process's soft open-file limit raised for IDLE client sockets (a broker raises its own)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < IDLE + 1_000:
        pytest.skip(f"the open-file limit ({hard}) is below the {IDLE + 1_000} the test needs")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_ten_thousand_idle_connections_cost_less_than_100_mb(martlet_process: Any, many_files: None) -> None:
    broker = martlet_process(http=None)
    host, port = broker.bootstrap.rsplit(":", 1)
    pid = broker.proc.pid
    with RawClient(broker.bootstrap) as warm:  # the first request's one-off allocations are not the connections'
        warm.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                     include_topic_authorized_operations=False))
    files_before, rss_before = _open_files(pid), _rss_mb(pid)
    with ExitStack() as stack:
        for _ in range(IDLE):
            stack.enter_context(socket.create_connection((host, int(port)), timeout=ANSWER_S))
        # (the warm-up connection may still have been open when files were counted)
        assert wait_until(lambda: _open_files(pid) >= files_before + IDLE - 1, 60.0), _open_files(pid)
        with RawClient(broker.bootstrap) as client:  # it answers with them all open
            answer = client.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                    include_topic_authorized_operations=False))
            assert answer.brokers
        rss_after = _rss_mb(pid)
    grown = rss_after - rss_before
    print(f"{IDLE} idle connections: RSS {rss_before:.1f} -> {rss_after:.1f} MB, "
          f"{grown * 1024 / IDLE:.1f} KB each")
    assert grown < IDLE_RSS_MAX_MB


# -- limits -------------------------------------------------------------------------------------

def _connect_from(bootstrap: str, source: str) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(ANSWER_S)
    sock.bind((source, 0))
    sock.connect((host, int(port)))
    return sock


def _read_frame(sock: socket.socket) -> bytes | None:
    """One answer frame without its size (None: the broker closed the connection)."""
    data = b""
    size = 4
    while len(data) < size:
        part = sock.recv(size - len(data))
        if not part:
            return None
        data += part
        if len(data) == 4 and size == 4:
            size += int.from_bytes(data, "big")
    return data[4:]


def _answers(sock: socket.socket, timeout_s: float = ANSWER_S) -> bool:
    """Whether the broker answers an ApiVersions on `sock` (False: it closed the connection)."""
    sock.settimeout(timeout_s)
    try:
        sock.sendall(encode_request(ApiVersionsRequest(), 1))
        body = _read_frame(sock)
    except (ConnectionResetError, BrokenPipeError):
        return False
    if body is None:
        return False
    header, answer = decode_response(body, 18, 0)
    return header.correlation_id == 1 and int(answer.error_code) == 0


def _alter_cluster(sock: socket.socket, name: str, value: str | None) -> None:
    """IncrementalAlterConfigs of the cluster-wide default `name` (None: delete it) on `sock`."""
    config = AlterableConfig(name=name, config_operation=SET if value is not None else DELETE, value=value)
    request = IncrementalAlterConfigsRequest(
        resources=(AlterConfigsResource(resource_type=BROKER, resource_name="", configs=(config,)),),
        validate_only=False)
    sock.settimeout(ANSWER_S)
    sock.sendall(encode_request(request, 7))
    body = _read_frame(sock)
    assert body is not None
    _, answer = decode_response(body, 44, 1)
    assert int(answer.responses[0].error_code) == 0, answer.responses[0].error_message


def _set_cluster_config(bootstrap: str, name: str, value: str | None) -> None:
    with RawClient(bootstrap) as admin:
        _alter_cluster(admin.sock, name, value)


def _refuses_one_over(bootstrap: str) -> bool:
    """Open connections from OTHER_HOST until one is refused: True if that is the (PER_IP+1)th,
    the first PER_IP answering; all are closed again."""
    opened = []
    try:
        for _ in range(PER_IP + 1):
            sock = _connect_from(bootstrap, OTHER_HOST)
            opened.append(sock)
            if not _answers(sock):
                return len(opened) == PER_IP + 1
        return False  # the limit is not applied yet
    finally:
        for sock in opened:
            sock.close()


def _served(bootstrap: str) -> socket.socket:
    """A connection from OTHER_HOST the broker serves (Kafka counts a closed connection out a
    moment after it closes)."""
    found = []

    def attempt() -> bool:
        sock = _connect_from(bootstrap, OTHER_HOST)
        if _answers(sock):
            found.append(sock)
            return True
        sock.close()
        return False

    assert wait_until(attempt, 10.0, interval_s=0.2), "no place freed for a new connection"
    return found[0]


@pytest.mark.java
@pytest.mark.parametrize("endpoint", ["martlet", "reference_kafka"])
def test_the_connection_over_max_connections_per_ip_is_closed_and_the_others_go_on(
        endpoint: str, request: pytest.FixtureRequest) -> None:
    bootstrap = request.getfixturevalue(endpoint).bootstrap
    _set_cluster_config(bootstrap, OVERRIDES, f"{OTHER_HOST}:{PER_IP}")
    try:
        # A dynamic config reaches Kafka's acceptor a moment after its answer.
        assert wait_until(lambda: _refuses_one_over(bootstrap), 30.0, interval_s=0.5)
        with ExitStack() as stack:
            kept = [stack.enter_context(_served(bootstrap)) for _ in range(PER_IP)]
            over = stack.enter_context(_connect_from(bootstrap, OTHER_HOST))
            assert not _answers(over), "the connection over the limit was served"
            assert all(_answers(sock) for sock in kept), "a connection within the limit stopped"
            with RawClient(bootstrap) as other:  # another address's count is its own
                assert other.request(ApiVersionsRequest()).error_code == 0
            kept[0].close()
            stack.enter_context(_served(bootstrap))  # the place freed is taken again
    finally:
        _set_cluster_config(bootstrap, OVERRIDES, None)


def test_at_max_connections_a_new_connection_waits_until_one_ends(martlet_process: Any, tmp_path: Any) -> None:
    config = tmp_path / "limits.toml"
    config.write_text("[gateway]\nmax_connections = 2\n")
    broker = martlet_process(extra_args=["--config", str(config)], http=None)
    with ExitStack() as stack:
        first, second = (stack.enter_context(_connect_from(broker.bootstrap, "127.0.0.1")) for _ in range(2))
        assert _answers(first) and _answers(second)
        waiting = stack.enter_context(_connect_from(broker.bootstrap, "127.0.0.1"))  # the kernel's backlog holds it
        with pytest.raises(TimeoutError):
            _answers(waiting, timeout_s=1.0)  # neither answered nor closed
        first.close()
        waiting.settimeout(ANSWER_S)
        assert _read_frame(waiting) is not None, "the waiting connection was not served once a place was free"
        # Raised at run time, the limit lets a waiting connection in without another ending.
        late = stack.enter_context(_connect_from(broker.bootstrap, "127.0.0.1"))
        _alter_cluster(second, "max.connections", "10")
        assert _answers(late)
