"""Every operator command's -h (and each subcommand's) ends with the exit codes scripts rely on,
and the connection options default as the README says: $MARTLET_BOOTSTRAP, else 127.0.0.1:9092;
$MARTLET_HTTP, else port 9644 of the bootstrap host."""

from __future__ import annotations

import argparse
import importlib
import re

import pytest

from martlet.tools.common import http_address

TOOLS = ("topic", "group", "produce", "consume", "status")
CODES = re.compile(r"exit codes: 0 done; 1 .+; 2 bad usage; 3 no broker answered within --timeout.*; 130 stopped by Ctrl-C",
                   re.DOTALL)


def tool_parser(tool: str) -> argparse.ArgumentParser:
    module = importlib.import_module(f"martlet.tools.{tool}")
    make = getattr(module, "parser", None) or module._parser
    parser: argparse.ArgumentParser = make()
    return parser


def with_subcommands(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found += list(action.choices.values())
    return found


@pytest.mark.parametrize("tool", TOOLS)
def test_every_help_ends_with_the_exit_codes(tool: str) -> None:
    for parser in with_subcommands(tool_parser(tool)):
        text = " ".join(parser.format_help().split())  # as one line, whatever the wrapping
        assert CODES.search(text) and text.endswith("130 stopped by Ctrl-C"), f"{parser.prog} -h:\n{parser.format_help()}"


@pytest.mark.parametrize("tool", TOOLS)
def test_the_broker_defaults_to_the_environment_then_localhost(tool: str, monkeypatch: pytest.MonkeyPatch) -> None:
    positional = {"topic": ["list"], "group": ["list"], "produce": ["t"], "consume": ["t"], "status": []}[tool]
    monkeypatch.delenv("MARTLET_BOOTSTRAP", raising=False)
    monkeypatch.delenv("MARTLET_HTTP", raising=False)
    args = tool_parser(tool).parse_args(positional)
    assert (args.bootstrap, http_address(args)) == ("127.0.0.1:9092", "127.0.0.1:9644")

    monkeypatch.setenv("MARTLET_BOOTSTRAP", "kafka-1:19092,kafka-2:19092")
    args = tool_parser(tool).parse_args(positional)
    assert (args.bootstrap, http_address(args)) == ("kafka-1:19092,kafka-2:19092", "kafka-1:9644")
    args = tool_parser(tool).parse_args([*positional, "--bootstrap", "10.0.0.5:9092"])
    assert (args.bootstrap, http_address(args)) == ("10.0.0.5:9092", "10.0.0.5:9644")

    monkeypatch.setenv("MARTLET_HTTP", "10.0.0.9:8080")
    assert http_address(tool_parser(tool).parse_args(positional)) == "10.0.0.9:8080"
