"""The user store is cluster-wide and durable (issue 39): a user made through one broker of a
cluster (ZooKeeper and HDFS) is described by the other within a second, and its change and
deletion too; a user survives a broker's kill -9 and restart."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

pytestmark = pytest.mark.integration

WAIT_S = 30.0
SEEN_S = 1.0  # the bound: every broker sees a change within a second


def _iterations(admin: AdminClient, user: str) -> list[int] | None:
    """The user's credentials' iterations as this broker describes them (None: no such user)."""
    try:
        described = admin.describe_user_scram_credentials([user])[user].result(WAIT_S)
    except Exception as error:  # noqa: BLE001 - RESOURCE_NOT_FOUND: the user is not (or no longer) known
        assert "RESOURCE_NOT_FOUND" in str(error) or "does not exist" in str(error), error
        return None
    return sorted(info.iterations for info in described.scram_credential_infos)


def _seen_within(admin: AdminClient, user: str, wanted: list[int] | None) -> float:
    started = time.monotonic()
    while (found := _iterations(admin, user)) != wanted:
        assert time.monotonic() - started < WAIT_S, f"{user}: {found}, not {wanted}"
    return time.monotonic() - started


def test_a_user_made_on_one_broker_is_known_to_the_other_within_a_second(local_cluster: Any) -> None:
    cluster = local_cluster(brokers=2, admins=1)
    first, second = (AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.port}"}) for broker in cluster.brokers)
    user = f"u{uuid.uuid4().hex[:8]}"
    made = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"secret")
    first.alter_user_scram_credentials([made])[user].result(WAIT_S)
    assert _seen_within(second, user, [4096]) < SEEN_S
    changed = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"other")
    second.alter_user_scram_credentials([changed])[user].result(WAIT_S)
    assert _seen_within(first, user, [4096, 8192]) < SEEN_S
    for mechanism in (ScramMechanism.SCRAM_SHA_512, ScramMechanism.SCRAM_SHA_256):  # one alteration a request
        first.alter_user_scram_credentials([UserScramCredentialDeletion(user, mechanism)])[user].result(WAIT_S)
    assert _seen_within(second, user, None) < SEEN_S


def test_a_user_survives_a_kill_and_restart(martlet_process: Any, tmp_path: Path) -> None:
    broker = martlet_process()
    user = f"u{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    made = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"secret")
    admin.alter_user_scram_credentials([made])[user].result(WAIT_S)
    port = int(broker.bootstrap.rsplit(":", 1)[1])
    broker.kill()
    broker.start(port)
    again = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert _iterations(again, user) == [4096]


def test_brokers_of_a_cluster_mark_transactions_on_a_sasl_inter_broker_listener(local_cluster: Any) -> None:
    """A cluster whose brokers talk on a SASL_PLAINTEXT listener of their own, as [sasl]
    inter_broker_user: a transaction over partitions of both brokers commits and aborts (its
    markers are WriteTxnMarkers to the other broker, authenticated first)."""
    from martlet.compat.bench.failover import all_led, wait_for
    from tests.support.transactions import commit_abort_commit, create_topic, read_all

    def config(port: int) -> str:
        return f"""[gateway]
listeners = ["LOCAL://127.0.0.1:{port}", "BROKERS://127.0.0.1:0"]
listener_security_protocol_map = "LOCAL:PLAINTEXT,BROKERS:SASL_PLAINTEXT"
inter_broker_listener_name = "BROKERS"

[sasl]
inter_broker_user = "broker"
inter_broker_password = "broker-secret"
"""

    cluster = local_cluster(brokers=2, admins=1, broker_config=config)
    topic = create_topic(cluster.bootstrap, partitions=6)
    wait_for(lambda: all_led(cluster.bootstrap, topic), 60, "every partition to have a leader")
    assert commit_abort_commit(cluster.bootstrap, topic, 6) == 3
    wanted = sorted(f"{r}-{p}" for r in (0, 2) for p in range(6))
    # commit_transaction returns once the outcome is decided; the markers follow (on the other
    # broker, authenticated first), and the last stable offset with them
    wait_for(lambda: sorted(read_all(cluster.bootstrap, topic, "read_committed", partitions=6)) == wanted, 60,
             "the committed transactions' records, marked on both brokers")
    logs = "".join(broker.log_tail() for broker in cluster.brokers)
    assert "SASL user broker created for calls between brokers" in logs
    assert "Failed authentication" not in logs
