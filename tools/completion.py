"""`martlet completion bash|zsh`: a shell completion script for the `martlet` command.

    eval "$(martlet completion bash)"    # in ~/.bashrc
    eval "$(martlet completion zsh)"     # in ~/.zshrc

The script is generated from COMMANDS below, the one table of every `martlet` command, their
subcommands and options (tests/unit/tools/test_completion.py holds it to the commands' parsers).
It completes command and subcommand names, options (after a "-"), the values of options that
take one of a few (--output, --format, --acks, ...), and the names of topics and groups where a
command takes one (NAMES): those it asks the broker for at each Tab, through the hidden
`martlet completion --names topics|groups` (the line's --bootstrap, else $MARTLET_BOOTSTRAP, else
127.0.0.1:9092, logging in as $MARTLET_COMMAND_CONFIG says (not the line's --command-config);
nothing when no broker answers within a second). Anything else falls back to file names.
"""

from __future__ import annotations

import argparse
import os

from . import client_config
from .common import BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP, OK, run

CONNECTION = ("--bootstrap", "-b", "--http", "--timeout", "--output", "-o", "--command-config", "--help", "-h")

# tool -> subcommand -> options; a tool without subcommands has the one subcommand "".
COMMANDS: dict[str, dict[str, tuple[str, ...]]] = {
    "topic": {
        "create": (*CONNECTION, "--partitions", "-p", "--replication-factor", "-r", "--config", "-c", "--if-not-exists"),
        "list": (*CONNECTION, "--internal"),
        "describe": CONNECTION,
        "alter": (*CONNECTION, "--config", "-c", "--delete-config", "-d"),
        "delete": (*CONNECTION, "--if-exists"),
        "add-partitions": (*CONNECTION, "--total"),
    },
    "group": {
        "list": CONNECTION,
        "describe": CONNECTION,
        "reset-offsets": (*CONNECTION, "--topic", "-t", "--to-earliest", "--to-latest", "--to-timestamp", "--to-datetime",
                          "--to-offset",
                          "--dry-run", "--execute"),
        "delete": CONNECTION,
    },
    "produce": {
        "": (*CONNECTION, "--file", "-f", "--key-separator", "-K", "--header", "-H", "--partition", "-p", "--format",
             "--acks", "--compression", "--progress", "--no-progress"),
    },
    "consume": {
        "": (*CONNECTION, "--from-beginning", "--offset", "--from-timestamp", "--from-end", "--partition", "-p",
             "--count", "-c", "--group", "-g", "--commit", "--no-commit", "--format", "-F", "--key", "--no-key",
             "--key-separator", "-K",
             "--timeout-idle", "--follow", "--progress", "--no-progress"),
    },
    "status": {"": CONNECTION},
    "user": {
        "create": (*CONNECTION, "--mechanism", "--iterations", "--password-file", "--password-stdin"),
        "list": CONNECTION,
        "delete": (*CONNECTION, "--mechanism"),
    },
    "completion": {"": ("--help", "-h")},
    "certs": {"create": ("--host", "--days", "--force", "--help", "-h")},
    # The broker's own commands (cli/main.py, compat/, connectors/export.py).
    "serve": {"": ("--listen", "--advertised", "--data-dir", "--store", "--zookeeper", "--http", "--udp", "--config",
                   "--insecure",
                   "--log-format", "--log-level", "--help", "-h")},
    "admin": {"": ("--zookeeper", "--store", "--session-ms", "--log-format", "--log-level", "--help", "-h")},
    "config": {"": ("--help", "-h")},
    "compat": {
        "reference-kafka": ("--startup-timeout", "--heap", "--help", "-h"),
        "kafka-tool": ("--timeout", "--help", "-h"),
        "run": ("--bootstrap", "--reference", "--security-config", "--reference-security-config", "--clients",
                "--scenarios", "--json", "--expect-findings", "--findings", "--jobs", "--list", "--help", "-h"),
    },
    "bench": {"": ("--rounds", "--quick", "--workloads", "--produce-mb", "--bootstrap", "--pid", "--hdfs",
                   "--martlet-config", "--cluster", "--kills", "--spark", "--udp", "--datagrams", "--native", "--secured",
                   "--json", "--check", "--help", "-h")},
    "export": {"": ("--to", "--store", "--format", "--keys", "--values", "--quiet", "--help", "-h")},
    "cluster": {
        "up": ("--brokers", "--admins", "--dir", "--timeout", "--help", "-h"),
        "down": ("--dir", "--timeout", "--help", "-h"),
        "status": ("--dir", "--help", "-h"),
    },
}

# Options whose value is one of a few words: in every command, or ("tool", option) in one.
VALUES: dict[str, tuple[str, ...]] = {
    "--output": ("table", "json"), "-o": ("table", "json"),
    "--format": ("raw", "json"), "-F": ("raw", "json"),
    "--acks": ("0", "1", "all"),
    "--compression": ("none", "gzip", "snappy", "lz4", "zstd"),
    "--log-format": ("text", "json"),
    "--log-level": ("debug", "info", "warning", "error"),
}
TOOL_VALUES: dict[tuple[str, str], tuple[str, ...]] = {
    ("export", "--format"): ("parquet",),
    ("export", "--keys"): ("bytes", "utf8", "json"),
    ("export", "--values"): ("bytes", "utf8", "json"),
    ("user", "--mechanism"): ("SCRAM-SHA-256", "SCRAM-SHA-512"),
}
SHELLS = ("bash", "zsh")

# Where a command takes topic or group names: tool -> subcommand ("" for none) -> what to ask
# the broker for, for every word after the subcommand that is not an option or an option's value.
NAMES: dict[str, dict[str, str]] = {
    "topic": {"describe": "topics", "alter": "topics", "delete": "topics", "add-partitions": "topics"},
    "group": {"describe": "groups", "reset-offsets": "groups", "delete": "groups"},
    "produce": {"": "topics"},
    "consume": {"": "topics"},
    "export": {"": "topics"},
}
NAME_OPTIONS = {("group", "--topic"): "topics", ("group", "-t"): "topics"}  # options whose value is a name
NAMES_TIMEOUT_S = 1.0  # the longest a Tab waits for the broker's names


def bash_script() -> str:
    head = ['    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
            '    local tool="${COMP_WORDS[1]}" sub="${COMP_WORDS[2]}" pos=$COMP_CWORD offer="" names="" boot="" i',
            "    for (( i=2; i<COMP_CWORD; i++ )); do",
            '        case "${COMP_WORDS[i-1]}" in --bootstrap|-b) boot="--bootstrap=${COMP_WORDS[i]}" ;; esac',
            "    done"]
    tail = ["    COMPREPLY=()",
            '    [[ -n "$offer" ]] && COMPREPLY=($(compgen -W "$offer" -- "$cur"))',
            "    return 0"]
    return _script("bash", head, tail, "complete -o default -F _martlet martlet")


def zsh_script() -> str:
    """A native zsh completion function (loading compinit first if the shell has not)."""
    head = ['    local cur="${words[CURRENT]}" prev="${words[CURRENT-1]}"',
            '    local tool="${words[2]}" sub="${words[3]}" pos=$(( CURRENT - 1 )) offer="" names="" boot="" i',
            "    for (( i=3; i<CURRENT; i++ )); do",
            '        case "${words[i-1]}" in --bootstrap|-b) boot="--bootstrap=${words[i]}" ;; esac',
            "    done"]
    tail = ['    if [[ -n "$offer" ]]; then',
            "        compadd -- ${=offer}",
            "    else",
            "        _files",
            "    fi"]
    load = "(( $+functions[compdef] )) || { autoload -U +X compinit && compinit; }\n"
    return load + _script("zsh", head, tail, "compdef _martlet martlet")


def _script(shell: str, head: list[str], tail: list[str], register: str) -> str:
    """The completion function, the same logic in both shells: `pos` is the index of the word
    being completed (1: the command), `offer` the words to offer (empty: file names), `names`
    what to ask the broker for (topics, groups), `boot` the line's --bootstrap."""
    lines = [
        f"# martlet shell completion, generated by `martlet completion {shell}`.",
        "_martlet() {",
        *head,
        '    case "$tool $prev" in',
        *_value_branches(),
        "    esac",
        '    if [[ -z "$offer$names" && $pos -eq 1 ]]; then',
        f'        offer="{" ".join(COMMANDS)}"',
        '    elif [[ -z "$offer$names" ]]; then',
        '        case "$tool" in',
        *[line for tool, subcommands in COMMANDS.items() for line in _tool_branch(tool, subcommands)],
        "        esac",
        "    fi",
        '    [[ -n "$names" ]] && offer="$(martlet completion --names $names $boot 2>/dev/null)"',
        *tail,
        "}",
        register,
    ]
    return "\n".join(lines) + "\n"


def _value_branches() -> list[str]:
    """`case "$tool $prev"` branches: one command's option values first, then everyone's."""
    tool_values = [f'        "{tool} {option}") offer="{" ".join(words)}" ;;' for (tool, option), words in TOOL_VALUES.items()]
    tool_names = [f'        "{tool} {option}") names="{kind}" ;;' for (tool, option), kind in NAME_OPTIONS.items()]
    shared = [f'        *" {option}") offer="{" ".join(words)}" ;;' for option, words in VALUES.items()]
    return tool_values + tool_names + shared


def _tool_branch(tool: str, subcommands: dict[str, tuple[str, ...]]) -> list[str]:
    """The `case` branch of one tool: its subcommand names at word 2, then each one's options
    (offered once the word begins with "-") or, where it takes them, topic or group names."""
    if tool == "completion":
        return [f'            {tool}) [[ $pos -eq 2 ]] && offer="{" ".join(SHELLS)}" ;;']
    names = NAMES.get(tool, {})
    if list(subcommands) == [""]:
        lines = [f"            {tool})",
                 '                if [[ "$cur" == -* ]]; then',
                 f'                    offer="{" ".join(subcommands[""])}"']
        if "" in names:
            lines += ['                elif [[ "$prev" != -* ]]; then', f'                    names="{names[""]}"']
        return [*lines, "                fi", "                ;;"]
    lines = [
        f"            {tool})",
        "                if [[ $pos -eq 2 ]]; then",
        f'                    offer="{" ".join(subcommands)}"',
        '                elif [[ "$cur" == -* ]]; then',
        '                    case "$sub" in',
        *[f'                        {name}) offer="{" ".join(options)}" ;;' for name, options in subcommands.items()],
        "                    esac",
    ]
    if names:
        lines += ['                elif [[ "$prev" != -* ]]; then',
                  '                    case "$sub" in',
                  *[f'                        {name}) names="{kind}" ;;' for name, kind in names.items()],
                  "                    esac"]
    return [*lines, "                fi", "                ;;"]


def names(args: argparse.Namespace) -> int:
    """The topic or group names the broker at --bootstrap has, one a line; nothing when no
    broker answers within NAMES_TIMEOUT_S (a Tab must not hang)."""
    from confluent_kafka.admin import AdminClient

    try:
        path = os.environ.get(client_config.COMMAND_CONFIG_ENV)
        client = AdminClient({"bootstrap.servers": args.bootstrap, "client.id": "martlet-completion", "log_level": 0,
                              "socket.connection.setup.timeout.ms": int(NAMES_TIMEOUT_S * 1000),
                              **(client_config.load(path) if path else {})})
        if args.names == "topics":
            found = [t for t in client.list_topics(timeout=NAMES_TIMEOUT_S).topics if not t.startswith("__")]
        else:
            listed = client.list_consumer_groups(request_timeout=NAMES_TIMEOUT_S).result(NAMES_TIMEOUT_S)
            found = [group.group_id for group in listed.valid]
    except Exception:  # no broker, a timeout, a refusal, a bad config file: nothing to offer; the shell offers files
        return OK
    print("\n".join(sorted(found)))
    return OK


def completion(args: argparse.Namespace) -> int:
    if args.names:
        return names(args)
    print(bash_script() if args.shell == "bash" else zsh_script(), end="")
    return OK


def parser() -> argparse.ArgumentParser:
    command = argparse.ArgumentParser(
        prog="martlet completion", description="Print a shell completion script for martlet: commands, subcommands, "
        "options and their values. Load it with: eval \"$(martlet completion bash)\" (in ~/.bashrc), or the same "
        "with zsh (in ~/.zshrc).")
    command.add_argument("shell", choices=SHELLS, nargs="?", help="the shell to complete in")
    # Asked by the scripts at each Tab, not by people: kept out of the help.
    command.add_argument("--names", choices=("topics", "groups"), help=argparse.SUPPRESS)
    command.add_argument("--bootstrap", "-b", default=os.environ.get(BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP), help=argparse.SUPPRESS)
    command.set_defaults(func=completion)
    return command


def main(argv: list[str]) -> int:
    command = parser()
    args = command.parse_args(argv)
    if (args.shell is None) == (args.names is None):
        command.error("give the shell to complete in: bash or zsh")
    return run(args.func, args)
