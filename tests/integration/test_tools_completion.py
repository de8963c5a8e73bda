"""Shell completion of topic and group names, with the real `martlet` command asking a real
broker at each Tab (`martlet completion --names`): from $MARTLET_BOOTSTRAP, from the line's own
--bootstrap, and nothing, quickly, when no broker answers."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from martlet.tools.completion import bash_script
from tests.integration.clients import confluent_create_topic, unique_topic

pytestmark = pytest.mark.integration

BASH = shutil.which("bash") or "bash"
RUN_TIMEOUT_S = 30.0
CLIENT_TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def closed_port() -> Iterator[str]:
    """A loopback port bound but not listening: connections to it are refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{sock.getsockname()[1]}"


def complete(bootstrap: str, *words: str) -> list[str]:
    """What bash offers for `words` (the last one being typed), with `martlet` the installed command."""
    env = {**os.environ, "MARTLET_BOOTSTRAP": bootstrap,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    command = 'source /dev/stdin; COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); _martlet; printf "%s\\n" "${COMPREPLY[@]}"'
    done = subprocess.run([BASH, "-c", command, "bash", *words], input=bash_script(), env=env, capture_output=True,
                          text=True, timeout=RUN_TIMEOUT_S, check=True)
    return done.stdout.split()


def test_topic_and_group_names_come_from_the_broker(martlet: Any, closed_port: str) -> None:
    prefix = unique_topic("completion")
    topics = [f"{prefix}-orders", f"{prefix}-payments"]
    for topic in topics:
        confluent_create_topic(martlet.bootstrap, topic, 1)
    group = f"{prefix}-billing"
    committer = Consumer({"bootstrap.servers": martlet.bootstrap, "group.id": group})
    try:
        committer.commit(offsets=[TopicPartition(topics[0], 0, 0)], asynchronous=False)
    finally:
        committer.close()

    assert complete(martlet.bootstrap, "martlet", "consume", prefix) == topics
    assert complete(martlet.bootstrap, "martlet", "topic", "describe", f"{prefix}-o") == topics[:1]
    assert complete(martlet.bootstrap, "martlet", "group", "reset-offsets", group, "--topic", f"{prefix}-p") == topics[1:]
    assert complete(martlet.bootstrap, "martlet", "group", "describe", prefix) == [group]
    # The line's --bootstrap wins over $MARTLET_BOOTSTRAP (here a port nobody listens on).
    assert complete(closed_port, "martlet", "produce", "--bootstrap", martlet.bootstrap, prefix) == topics

    started = time.monotonic()
    assert complete(closed_port, "martlet", "consume", prefix) == []  # bash falls back to file names
    assert time.monotonic() - started < 5  # the interpreter's start and at most a second for the broker
