"""`martlet completion`: the scripts are valid shell, complete what a user types, and the one
table they come from (tools/completion.COMMANDS) names exactly the commands' own options.

Where a name is completed the scripts run `martlet completion --names topics|groups`; here a
shell function named martlet stands in for it and prints what it was asked (the real command
against a broker: tests/integration/test_tools_completion.py)."""

from __future__ import annotations

import argparse
import importlib
import shutil
import subprocess

import pytest

from martlet.tools.completion import COMMANDS, bash_script, zsh_script

BASH = shutil.which("bash") or "bash"
SHELL_TIMEOUT_S = 30.0


# Stands in for `martlet completion --names KIND [--bootstrap=B]`: offers KIND and B (or "default").
NAMES_ASKED = 'martlet() { printf "%s\\n" "$3" "${4:-default}"; }; '


def complete(*words: str) -> list[str]:
    """What bash's completion function offers for `words` (the last one being typed)."""
    command = (NAMES_ASKED + 'source /dev/stdin; COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); _martlet; '
               'printf "%s\\n" "${COMPREPLY[@]}"')
    done = subprocess.run([BASH, "-c", command, "bash", *words], input=bash_script(), capture_output=True, text=True,
                          timeout=SHELL_TIMEOUT_S, check=True)
    return done.stdout.split()


def test_bash_accepts_its_script() -> None:
    subprocess.run([BASH, "-n"], input=bash_script(), text=True, timeout=SHELL_TIMEOUT_S, check=True)


ZSH = shutil.which("zsh")


def test_zsh_runs_the_same_logic() -> None:
    """zsh's compadd and _files only work inside a completion; here they print what they were given.
    .ci/run installs zsh: without it this fails rather than skips."""
    assert ZSH is not None, "zsh is not installed (apt-get install zsh)"
    assert ZSH is not None
    subprocess.run([ZSH, "-n"], input=zsh_script(), text=True, timeout=SHELL_TIMEOUT_S, check=True)
    command = (NAMES_ASKED + 'source /dev/stdin; compadd() { shift; print -l -- "$@" }; _files() { print FILES }; '
               'words=("$@"); CURRENT=$#; _martlet')
    for words, offered in ([["martlet", "to"], "topic"], [["martlet", "topic", "create", "t", "--if"], "--if-not-exists"],
                           [["martlet", "status", "-o", ""], "json"], [["martlet", "topic", "create", ""], "FILES"],
                           [["martlet", "consume", "-b", "h:1", ""], "--bootstrap=h:1"],
                           [["martlet", "serve", "--log-level", ""], "warning"]):
        done = subprocess.run([ZSH, "-f", "-c", command, "zsh", *words], input=zsh_script(), capture_output=True,
                              text=True, timeout=SHELL_TIMEOUT_S, check=True)
        assert offered in done.stdout.split(), (words, done.stdout, done.stderr)


@pytest.mark.parametrize(("words", "offered"), [
    (["martlet", "to"], ["topic"]),
    (["martlet", "co"], ["consume", "completion", "config", "compat"]),
    (["martlet", "topic", "add"], ["add-partitions"]),
    (["martlet", "group", ""], ["list", "describe", "reset-offsets", "delete"]),
    (["martlet", "topic", "create", "t", "--if"], ["--if-not-exists"]),
    (["martlet", "group", "reset-offsets", "g", "--to-e"], ["--to-earliest"]),
    (["martlet", "status", "--output", ""], ["table", "json"]),
    (["martlet", "produce", "t", "--compression", "z"], ["zstd"]),
    (["martlet", "completion", ""], ["bash", "zsh"]),
    (["martlet", "topic", "create", ""], []),  # a new name: nothing offered (bash falls back to files)
    (["martlet", "topic", "describe", ""], ["topics", "default"]),  # the broker's names, from $MARTLET_BOOTSTRAP
    (["martlet", "consume", "--bootstrap", "kafka:9092", ""], ["topics", "--bootstrap=kafka:9092"]),
    (["martlet", "produce", "-b", "kafka:9092", "-p", "1", ""], ["topics", "--bootstrap=kafka:9092"]),
    (["martlet", "produce", "t", "--bootstrap", ""], []),  # an option's value: files
    (["martlet", "group", "delete", ""], ["groups", "default"]),
    (["martlet", "group", "reset-offsets", "g", "--topic", ""], ["topics", "default"]),
    (["martlet", "export", "t", "--format", ""], ["parquet"]),
    (["martlet", "produce", "t", "--format", ""], ["raw", "json"]),
    (["martlet", "serve", "--log"], ["--log-format", "--log-level"]),
    (["martlet", "serve", "--log-format", ""], ["text", "json"]),
    (["martlet", "cluster", ""], ["up", "down", "status"]),
    (["martlet", "cluster", "up", "--b"], ["--brokers"]),
    (["martlet", "compat", "r"], ["reference-kafka", "run"]),
    (["martlet", "bench", "--na"], ["--native"]),
])
def test_completes(words: list[str], offered: list[str]) -> None:
    assert complete(*words) == offered


def options(parser: argparse.ArgumentParser) -> set[str]:
    """A parser's options, but those kept out of its help (asked by scripts, not people)."""
    return {option for action in parser._actions for option in action.option_strings if action.help != argparse.SUPPRESS}


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {"": parser}


# The broker's own commands: their parsers (cli/main.py's `serve`, `admin` and `config` are its own).
OWN_PARSERS = {"compat": "martlet.compat.cli", "bench": "martlet.compat.bench.cli", "export": "martlet.connectors.export",
               "cluster": "martlet.compat.cluster_cli"}


def command_parser(tool: str) -> argparse.ArgumentParser:
    if tool in ("serve", "admin", "config"):
        from martlet.cli.main import _parser

        return subcommands(_parser())[tool]
    module = importlib.import_module(OWN_PARSERS.get(tool, f"martlet.tools.{tool}"))
    make = getattr(module, "parser", None) or module._parser
    parser: argparse.ArgumentParser = make()
    return parser


def test_every_command_is_in_the_table() -> None:
    from martlet.cli.main import _parser

    assert set(subcommands(_parser())) == set(COMMANDS)


@pytest.mark.parametrize("tool", sorted(COMMANDS))
def test_the_table_names_every_option_of_the_commands(tool: str) -> None:
    found = {name: options(command) for name, command in subcommands(command_parser(tool)).items()}
    listed = {name: set(names) for name, names in COMMANDS[tool].items()}
    assert found.keys() == listed.keys()
    for name, names in listed.items():
        assert (sorted(found[name] - names), sorted(names - found[name])) == ([], []), (
            f"martlet {tool} {name}: (only in the parser, only in COMMANDS)")
