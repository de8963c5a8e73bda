"""`martlet user` and --command-config against a broker with LOCAL (PLAINTEXT on 127.0.0.1),
SASL_PLAINTEXT and SASL_SSL listeners, run as a user runs them (subprocesses): a user is made
on the LOCAL listener with the password on standard input, then `martlet topic`, `produce`,
`consume` and `group` log in as it over SASL_SSL with SCRAM-SHA-512, from a Kafka client
properties file (the one kafka-topics.sh --command-config reads) named by --command-config or by
$MARTLET_COMMAND_CONFIG. A wrong password, or a deleted user, ends a command at once (exit 1,
one line saying the login was refused) instead of waiting out --timeout; no command prints a
password."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.sasl import Secured, start_secured

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-m", "martlet.cli"]
RUN_TIMEOUT_S = 60.0
COMMAND_TIMEOUT_S = 30  # each command's --timeout: a refused login must end it well before
REFUSED_WITHIN_S = 15.0  # the interpreter's start and a few failed-authentication delays, far below --timeout
PASSWORD = "tool-secret-1"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    found = start_secured(tmp_path_factory.mktemp("martlet-user"))
    try:
        yield found
    finally:
        found.broker.kill()


def cli(*args: str, code: int = 0, stdin: str | None = None, env: dict[str, str] | None = None,
        secret: str = PASSWORD) -> subprocess.CompletedProcess[str]:
    """Runs `martlet ARGS` (no $MARTLET_COMMAND_CONFIG unless `env` gives it): exit `code`, and no
    `secret` in what it printed."""
    environment = {key: value for key, value in os.environ.items() if key != "MARTLET_COMMAND_CONFIG"}
    done = subprocess.run([*CLI, *args, "--timeout", str(COMMAND_TIMEOUT_S)], input=stdin, capture_output=True,
                          text=True, env={**environment, **(env or {})}, timeout=RUN_TIMEOUT_S)
    assert done.returncode == code, f"martlet {' '.join(args)}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert secret not in done.stdout + done.stderr
    return done


def local(secured: Secured, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return cli(*args, "--bootstrap", secured.local, **kwargs)


def over_sasl_ssl(secured: Secured, config: Path, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return cli(*args, "--bootstrap", secured.addresses["SASL_SSL"], "--command-config", str(config), **kwargs)


def client_properties(secured: Secured, folder: Path, user: str, password: str) -> Path:
    """Kafka client properties for SCRAM-SHA-512 over SASL_SSL, as the Java client takes them."""
    path = folder / f"{user}-{uuid.uuid4().hex[:6]}.properties"
    path.write_text("# the Java client's names\n"
                    "security.protocol=SASL_SSL\n"
                    "sasl.mechanism=SCRAM-SHA-512\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
                    f'    username="{user}" \\\n'
                    f'    password="{password}";\n'
                    "ssl.truststore.type=PEM\n"
                    f"ssl.truststore.location={secured.certs / 'ca.pem'}\n")
    return path


def users(secured: Secured) -> dict[str, list[dict[str, Any]]]:
    listed = json.loads(local(secured, "user", "list", "--output", "json").stdout)
    return {user["user"]: user["mechanisms"] for user in listed["users"]}


def refused_login(done: subprocess.CompletedProcess[str], started: float) -> None:
    """One line on standard error saying the login was refused, soon."""
    assert time.monotonic() - started < REFUSED_WITHIN_S
    line = done.stderr.strip()
    assert line.startswith("martlet: login refused at ") and line.endswith("(_AUTHENTICATION)"), line
    assert "\n" not in line, line


def test_a_user_made_on_the_local_listener_works_over_sasl_ssl(secured: Secured, tmp_path: Path) -> None:
    user, topic, group = (f"{prefix}-{uuid.uuid4().hex[:8]}" for prefix in ("alice", "orders", "billing"))
    made = local(secured, "user", "create", user, "--password-stdin", stdin=PASSWORD + "\n")
    assert made.stdout.strip() == f"created user {user} (SCRAM-SHA-256, SCRAM-SHA-512, 8192 iterations)"
    assert users(secured)[user] == [{"mechanism": "SCRAM-SHA-256", "iterations": 8192},
                                    {"mechanism": "SCRAM-SHA-512", "iterations": 8192}]

    config = client_properties(secured, tmp_path, user, PASSWORD)
    over_sasl_ssl(secured, config, "topic", "create", topic, "--partitions", "2")
    listed = json.loads(over_sasl_ssl(secured, config, "topic", "list", "--output", "json").stdout)
    assert topic in [row["name"] for row in listed["topics"]]
    lines = [f"record-{index}" for index in range(6)]
    produced = over_sasl_ssl(secured, config, "produce", topic, stdin="\n".join(lines) + "\n")
    assert f"produced 6 records to {topic}" in produced.stderr
    consumed = over_sasl_ssl(secured, config, "consume", topic, "--group", group, "--from-beginning", "--count", "6")
    assert sorted(consumed.stdout.split()) == lines
    # The same file named by the environment instead of the option.
    described = cli("group", "describe", group, "--output", "json", "--bootstrap", secured.addresses["SASL_SSL"],
                    env={"MARTLET_COMMAND_CONFIG": str(config)})
    assert json.loads(described.stdout)["groups"][0]["lag"] == 0

    deleted = local(secured, "user", "delete", user)
    assert deleted.stdout.strip() == f"deleted user {user}"
    assert user not in users(secured)
    started = time.monotonic()
    refused_login(over_sasl_ssl(secured, config, "topic", "list", code=1), started)


def test_a_wrong_password_is_refused_at_once_by_every_command(secured: Secured, tmp_path: Path) -> None:
    user, topic = f"bob-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    password_file = tmp_path / "bob.password"
    password_file.write_text(PASSWORD + "\n")
    local(secured, "user", "create", user, "--password-file", str(password_file), "--mechanism", "SCRAM-SHA-512")
    local(secured, "topic", "create", topic)
    wrong = f"wrong-{uuid.uuid4().hex}"
    config = client_properties(secured, tmp_path, user, wrong)
    for args, stdin in ((["topic", "list"], None), (["status"], None), (["produce", topic], "x\n"),
                        (["consume", topic], None), (["user", "list"], None)):
        started = time.monotonic()
        refused_login(over_sasl_ssl(secured, config, *args, code=1, stdin=stdin, secret=wrong), started)
    # The right password, to the same user, over the same listener.
    over_sasl_ssl(secured, client_properties(secured, tmp_path, user, PASSWORD), "topic", "describe", topic)


def test_create_replaces_a_password_and_delete_names_what_is_missing(secured: Secured, tmp_path: Path) -> None:
    user = f"carol-{uuid.uuid4().hex[:8]}"
    local(secured, "user", "create", user, "--password-stdin", "--iterations", "4096", stdin="first-password\n",
          secret="first-password")
    replaced = local(secured, "user", "create", user, "--password-stdin", "--mechanism", "SCRAM-SHA-512",
                     stdin=PASSWORD + "\n")
    assert replaced.stdout.strip() == f"replaced the password of user {user} (SCRAM-SHA-512, 8192 iterations)"
    assert "keeps its old password for SCRAM-SHA-256" in replaced.stderr
    assert users(secured)[user] == [{"mechanism": "SCRAM-SHA-256", "iterations": 4096},
                                    {"mechanism": "SCRAM-SHA-512", "iterations": 8192}]
    over_sasl_ssl(secured, client_properties(secured, tmp_path, user, PASSWORD), "topic", "list")
    started = time.monotonic()
    refused_login(over_sasl_ssl(secured, client_properties(secured, tmp_path, user, "first-password"), "topic", "list",
                                code=1, secret="first-password"), started)

    only = json.loads(local(secured, "user", "delete", user, "--mechanism", "SCRAM-SHA-256", "--output", "json").stdout)
    assert only == {"user": user, "deleted": ["SCRAM-SHA-256"], "remaining": ["SCRAM-SHA-512"]}
    missing = local(secured, "user", "delete", user, "--mechanism", "SCRAM-SHA-256", code=1).stderr.strip()
    assert missing == f"martlet: user {user} has no SCRAM-SHA-256 credential, only SCRAM-SHA-512 (RESOURCE_NOT_FOUND)"
    local(secured, "user", "delete", user)
    absent = local(secured, "user", "delete", user, code=1).stderr.strip()
    assert absent == f"martlet: user {user} does not exist (RESOURCE_NOT_FOUND)"


def test_a_config_file_that_cannot_be_used_is_bad_usage(secured: Secured, tmp_path: Path) -> None:
    config = tmp_path / "gssapi.properties"
    config.write_text("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n"
                      'sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;\n')
    stderr = over_sasl_ssl(secured, config, "topic", "list", code=2).stderr.strip()
    assert stderr.startswith(f"martlet: --command-config {config}: sasl.mechanism must be one of PLAIN,"), stderr
