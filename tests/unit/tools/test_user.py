"""`martlet user`: its arguments (no password on the command line, iterations Kafka accepts,
mechanisms), where the password comes from (a file, standard input, or asked twice on a
terminal), and its help ending with the exit codes. Against a broker:
tests/integration/test_tools_user.py."""

from __future__ import annotations

import argparse
import io
import re
import sys
from pathlib import Path

import pytest

from martlet.tools.common import USAGE, Failed
from martlet.tools.user import PASSWORD_BYTES_MAX, chosen_mechanisms, parser, read_password

CODES = re.compile(r"exit codes: 0 done; 1 .+; 2 bad usage; 3 no broker answered within --timeout.*; 130 stopped by Ctrl-C",
                   re.DOTALL)


def parse(*argv: str) -> argparse.Namespace:
    return parser().parse_args(list(argv))


def subparsers() -> dict[str, argparse.ArgumentParser]:
    for action in parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("martlet user has no subcommands")


def test_the_subcommands_and_their_defaults() -> None:
    assert sorted(subparsers()) == ["create", "delete", "list"]
    args = parse("create", "alice")
    assert (args.name, args.mechanism, args.iterations, args.password_file, args.password_stdin) == (
        "alice", None, 8192, None, False)
    assert parse("delete", "alice", "--mechanism", "SCRAM-SHA-512").mechanism == ["SCRAM-SHA-512"]
    assert parse("list", "-o", "json").output == "json"


def test_no_option_takes_the_password_itself() -> None:
    """Only a file's name or a flag: an argument is seen by everyone running `ps`."""
    for command in subparsers().values():
        options = {option for action in command._actions for option in action.option_strings}
        assert not {option for option in options if "pass" in option} - {"--password-file", "--password-stdin"}
    with pytest.raises(SystemExit) as usage:
        parse("create", "alice", "--password", "secret")
    assert usage.value.code == USAGE


def test_one_source_of_password_at_a_time(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as usage:
        parse("create", "alice", "--password-file", "pw", "--password-stdin")
    assert usage.value.code == USAGE
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.parametrize(("given", "taken"), [("4096", 4096), ("16384", 16384), ("10000", 10000)])
def test_iterations_kafka_accepts(given: str, taken: int) -> None:
    assert parse("create", "alice", "--iterations", given).iterations == taken


@pytest.mark.parametrize("given", ["4095", "16385", "0", "many"])
def test_other_iterations_are_bad_usage(given: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as usage:
        parse("create", "alice", "--iterations", given)
    assert usage.value.code == USAGE
    err = capsys.readouterr().err
    assert "Kafka accepts 4096 to 16384 iterations" in err or "expected a number" in err


def test_mechanisms_are_scram_ones_each_once_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    given = parse("create", "alice", "--mechanism", "SCRAM-SHA-512", "--mechanism", "SCRAM-SHA-256",
                  "--mechanism", "SCRAM-SHA-512").mechanism
    assert chosen_mechanisms(given) == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert chosen_mechanisms(None) == []  # create makes both, delete removes every one the user has
    with pytest.raises(SystemExit):
        parse("create", "alice", "--mechanism", "PLAIN")  # PLAIN logins are checked against the SCRAM credentials
    assert "invalid choice: 'PLAIN'" in capsys.readouterr().err


def test_every_help_ends_with_the_exit_codes() -> None:
    for command in [parser(), *subparsers().values()]:
        text = " ".join(command.format_help().split())
        assert CODES.search(text) and text.endswith("130 stopped by Ctrl-C"), command.format_help()


# -- the password ------------------------------------------------------------------------------

class Stdin:
    """Stands in for sys.stdin: bytes to read, and whether it is a terminal."""

    def __init__(self, data: bytes = b"", tty: bool = False) -> None:
        self.buffer = io.BytesIO(data)
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize(("written", "password"), [
    (b"pw one\n", b"pw one"), (b"pw one\r\n", b"pw one"), (b"pw one", b"pw one"), (" pässwört \n".encode(), " pässwört ".encode()),
])
def test_a_password_file_holds_one_line(tmp_path: Path, written: bytes, password: bytes) -> None:
    path = tmp_path / "pw"
    path.write_bytes(written)
    assert read_password(parse("create", "alice", "--password-file", str(path))) == password


@pytest.mark.parametrize(("written", "message"), [
    (b"", "is empty"),
    (b"\n", "is empty"),
    (b"one\ntwo\n", "holds more than one line"),
    (b"\xff\xfe\n", "is not UTF-8 text"),
    (b"x" * (PASSWORD_BYTES_MAX + 1), f"longer than {PASSWORD_BYTES_MAX} bytes"),
    (b"x" * (PASSWORD_BYTES_MAX * 10), f"longer than {PASSWORD_BYTES_MAX} bytes"),
])
def test_a_password_file_that_is_not_a_password(tmp_path: Path, written: bytes, message: str) -> None:
    path = tmp_path / "pw"
    path.write_bytes(written)
    with pytest.raises(Failed, match=message) as failed:
        read_password(parse("create", "alice", "--password-file", str(path)))
    assert failed.value.code == USAGE


def test_a_password_file_that_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(Failed, match="cannot read --password-file .*missing: No such file") as failed:
        read_password(parse("create", "alice", "--password-file", str(tmp_path / "missing")))
    assert failed.value.code == USAGE


def test_the_password_from_standard_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", Stdin(b"from stdin\n"))
    assert read_password(parse("create", "alice", "--password-stdin")) == b"from stdin"
    monkeypatch.setattr(sys, "stdin", Stdin(b"one\ntwo"))
    with pytest.raises(Failed, match="standard input holds more than one line"):
        read_password(parse("create", "alice", "--password-stdin"))


def test_on_a_terminal_the_password_is_asked_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    prompts: list[str] = []
    answers = iter(["typed", "typed", "typed", "mistyped"])

    def getpass(prompt: str) -> str:
        prompts.append(prompt)
        return next(answers)

    monkeypatch.setattr(sys, "stdin", Stdin(tty=True))
    monkeypatch.setattr("getpass.getpass", getpass)
    assert read_password(parse("create", "alice")) == b"typed"
    assert prompts == ["password of user alice: ", "the same password again: "]
    with pytest.raises(Failed, match="the two passwords differ: nothing changed") as failed:
        read_password(parse("create", "alice"))
    assert failed.value.code == USAGE


def test_without_a_terminal_nothing_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", Stdin(b"not read", tty=False))
    monkeypatch.setattr("getpass.getpass", lambda prompt: pytest.fail("asked"))
    with pytest.raises(Failed, match="no password given: use --password-file FILE or --password-stdin") as failed:
        read_password(parse("create", "alice"))
    assert failed.value.code == USAGE


def test_create_reads_the_password_before_connecting(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A bad password source ends the command at once, whatever the broker (here none)."""
    from martlet.tools.user import main

    monkeypatch.setattr(sys, "stdin", Stdin(b"", tty=False))
    assert main(["create", "alice", "--bootstrap", "127.0.0.1:1", "--timeout", "30"]) == USAGE
    assert capsys.readouterr().err.startswith("martlet: no password given")
