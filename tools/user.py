"""`martlet user`: create, list and delete the SCRAM users that log in on SASL listeners.

Kafka admin requests through librdkafka (DescribeUserScramCredentials and
AlterUserScramCredentials, KIP-554), so it works against any Kafka endpoint with SCRAM users,
as `kafka-configs.sh --entity-type users` does. librdkafka salts and hashes the password here:
the request carries the salt, the iteration count and the salted password, never the password
itself. A user logs in with SCRAM-SHA-256 or SCRAM-SHA-512 for each credential it has, and on
Martlet also with PLAIN, which is checked against the same credentials.

The password is read from --password-file, from standard input (--password-stdin) or asked twice
on the terminal; never from the command line, where `ps` and the shell's history would show it.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from concurrent.futures import Future
from pathlib import Path
from typing import IO, Any, cast

from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from .common import (
    OK,
    USAGE,
    Failed,
    KafkaFailed,
    admin_client,
    exit_codes,
    fail,
    print_json,
    print_table,
    run,
    subcommand,
    wait_admin,
)

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
ITERATIONS_MIN, ITERATIONS_MAX = 4096, 16384  # what Kafka's controller accepts (UNACCEPTABLE_CREDENTIAL outside)
ITERATIONS_DEFAULT = 8192
PASSWORD_BYTES_MAX = 1024  # a longer password file or standard input is refused, unread past this

DESCRIPTION = "Create, list and delete the SCRAM users that log in on SASL listeners."
EXAMPLES = """examples:
  martlet user create alice                                  (asks for the password twice)
  martlet user create alice --password-file alice.password --mechanism SCRAM-SHA-512
  pass show kafka/alice | martlet user create alice --password-stdin
  martlet user list
  martlet user delete alice

Each subcommand has its own help: martlet user create -h. Users are made on a listener that
needs no login (a loopback PLAINTEXT one, where the first user is made), or through a SASL
listener with --command-config FILE (Kafka client properties: security.protocol,
sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ...; default
$MARTLET_COMMAND_CONFIG). The request carries the salted password, which is enough to log in
with SCRAM: send it over TLS or loopback only.

""" + exit_codes("the broker refused (a user that does not exist, a credential it does not accept, a login)")


def _phrases(user: str) -> dict[str, str]:
    return {"RESOURCE_NOT_FOUND": f"user {user} does not exist"}


def _mechanism(name: str) -> ScramMechanism:
    return ScramMechanism[name.replace("-", "_")]


def _name(mechanism: ScramMechanism) -> str:
    return mechanism.name.replace("_", "-")


# -- the password ------------------------------------------------------------------------------

def read_password(args: argparse.Namespace) -> bytes:
    """The new password (UTF-8): from --password-file, standard input, or asked twice with getpass
    when standard input is a terminal. One line: a final line break is not part of it."""
    if args.password_file is not None:
        try:
            with Path(args.password_file).open("rb") as file:
                return _one_line(file, f"--password-file {args.password_file}")
        except OSError as error:
            raise Failed(f"cannot read --password-file {args.password_file}: {error.strerror or error}", USAGE) from None
    if args.password_stdin:
        return _one_line(sys.stdin.buffer, "standard input")
    if not sys.stdin.isatty():
        fail("no password given: use --password-file FILE or --password-stdin (standard input is not a terminal "
             "to ask on)", USAGE)
    return _asked(args.name)


def _one_line(source: IO[bytes], where: str) -> bytes:
    data = source.read(PASSWORD_BYTES_MAX + 3)  # the password, a line break, and one byte to see there is more
    password = data[:-2] if data.endswith(b"\r\n") else data[:-1] if data.endswith(b"\n") else data
    if len(password) > PASSWORD_BYTES_MAX:
        fail(f"the password from {where} is longer than {PASSWORD_BYTES_MAX} bytes", USAGE)
    if b"\n" in password or b"\r" in password:
        fail(f"{where} holds more than one line: the password is one line", USAGE)
    return _checked(password, where)


def _asked(user: str) -> bytes:
    first = getpass.getpass(f"password of user {user}: ")
    if getpass.getpass("the same password again: ") != first:
        fail("the two passwords differ: nothing changed", USAGE)
    return _checked(first.encode(), "the terminal")


def _checked(password: bytes, where: str) -> bytes:
    if not password:
        fail(f"the password from {where} is empty", USAGE)
    try:
        password.decode("utf-8")  # what Kafka's clients send: a password they can type
    except UnicodeDecodeError:
        fail(f"the password from {where} is not UTF-8 text", USAGE)
    return password


def iterations(text: str) -> int:
    """argparse's type= of --iterations: a number Kafka accepts."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not ITERATIONS_MIN <= value <= ITERATIONS_MAX:
        raise argparse.ArgumentTypeError(f"Kafka accepts {ITERATIONS_MIN} to {ITERATIONS_MAX} iterations, not {value}")
    return value


# -- create ------------------------------------------------------------------------------------

def create(args: argparse.Namespace) -> int:
    password = read_password(args)  # asked before connecting, so the prompt comes at once
    mechanisms = chosen_mechanisms(args.mechanism) or list(MECHANISMS)
    client = admin_client(args)
    before = described(client, args, args.name)
    for m in mechanisms:  # one request each: Kafka's controller takes one alteration per user in a request
        upsert: list[UserScramCredentialAlteration] = [
            UserScramCredentialUpsertion(args.name, ScramCredentialInfo(_mechanism(m), args.iterations), password)]
        future = client.alter_user_scram_credentials(upsert, request_timeout=args.timeout)[args.name]
        wait_admin(future, args, _phrases(args.name), f"cannot create user {args.name}")
    kept = sorted(set(before) - set(mechanisms))
    if args.output == "json":
        print_json({"user": args.name, "created": not before, "mechanisms": mechanisms, "iterations": args.iterations,
                    "kept": kept})
        return OK
    done = "created user" if not before else "replaced the password of user"
    print(f"{done} {args.name} ({', '.join(mechanisms)}, {args.iterations} iterations)")
    if kept:
        print(f"martlet: user {args.name} keeps its old password for {', '.join(kept)} (martlet user delete "
              f"{args.name} --mechanism {kept[0]} removes it)", file=sys.stderr)
    return OK


def chosen_mechanisms(given: list[str] | None) -> list[str]:
    """--mechanism's values, each once, in MECHANISMS' order ([] when none was given)."""
    return [m for m in MECHANISMS if m in (given or [])]


def described(client: AdminClient, args: argparse.Namespace, user: str) -> dict[str, int]:
    """The user's credentials, mechanism -> iterations ({}: no such user)."""
    futures = cast(dict[str, Future[Any]], client.describe_user_scram_credentials([user], request_timeout=args.timeout))
    future = futures[user]
    try:
        answer = wait_admin(future, args, _phrases(user), f"cannot describe user {user}")
    except KafkaFailed as failure:
        if failure.error_name == "RESOURCE_NOT_FOUND":
            return {}
        raise
    return _credentials(answer)


def _credentials(description: Any) -> dict[str, int]:
    return {_name(info.mechanism): int(info.iterations) for info in sorted(description.scram_credential_infos,
                                                                          key=lambda info: info.mechanism)}


# -- list --------------------------------------------------------------------------------------

def list_users(args: argparse.Namespace) -> int:
    client = admin_client(args)
    every = cast(Future[Any], client.describe_user_scram_credentials(request_timeout=args.timeout))  # None: all users
    answer = wait_admin(every, args, {}, "cannot list users")
    users = [{"user": name, "mechanisms": [{"mechanism": m, "iterations": i} for m, i in _credentials(d).items()]}
             for name, d in sorted(answer.items())]
    if args.output == "json":
        print_json({"users": users})
    else:
        rows = [(user["user"], m["mechanism"], m["iterations"]) for user in users for m in user["mechanisms"]]
        print_table(None, ["USER", "MECHANISM", "ITERATIONS"], rows)
    return OK


# -- delete ------------------------------------------------------------------------------------

def delete(args: argparse.Namespace) -> int:
    client = admin_client(args)
    had = described(client, args, args.name)
    if not had:
        fail(f"user {args.name} does not exist (RESOURCE_NOT_FOUND)")
    mechanisms = chosen_mechanisms(args.mechanism) or sorted(had)
    missing = [m for m in mechanisms if m not in had]
    if missing:
        fail(f"user {args.name} has no {' or '.join(missing)} credential, only {', '.join(sorted(had))} "
             f"(RESOURCE_NOT_FOUND)")
    for m in mechanisms:  # one request each, as above
        deletion: list[UserScramCredentialAlteration] = [UserScramCredentialDeletion(args.name, _mechanism(m))]
        future = client.alter_user_scram_credentials(deletion, request_timeout=args.timeout)[args.name]
        wait_admin(future, args, _phrases(args.name), f"cannot delete user {args.name}")
    remaining = sorted(set(had) - set(mechanisms))
    if args.output == "json":
        print_json({"user": args.name, "deleted": mechanisms, "remaining": remaining})
    elif remaining:
        print(f"deleted the {', '.join(mechanisms)} credential of user {args.name} ({', '.join(remaining)} remains)")
    else:
        print(f"deleted user {args.name}")
    return OK


# -- command line ------------------------------------------------------------------------------

def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="martlet user", description=DESCRIPTION, epilog=EXAMPLES,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    subs = top.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    _create_parser(subs)
    subcommand(subs, "list", list_users, "list the users and their mechanisms",
               "List every SCRAM user with each mechanism it has a credential for and its iteration count "
               "(never a password: the broker does not have it).")
    command = subcommand(subs, "delete", delete, "delete a user, or some of its mechanisms",
                         "Delete a user's credentials: all of them (the user is gone), or those of --mechanism. "
                         "Connections it has open stay open until they log in again.")
    command.add_argument("name", metavar="NAME", help="the user")
    command.add_argument("--mechanism", action="append", choices=MECHANISMS,
                         help="delete only this mechanism's credential (repeatable; default: every one it has)")
    return top


def _create_parser(subs: Any) -> None:
    command = subcommand(subs, "create", create, "create a user, or replace its password",
                         "Create a user with a SCRAM credential for each --mechanism. A user that exists gets "
                         "the new password for those mechanisms (as Kafka does: kafka-configs.sh --add-config "
                         "replaces it too); its other mechanisms keep the old one. The password comes from "
                         "--password-file, --password-stdin or, on a terminal, is asked twice; it is never an "
                         "argument, which `ps` would show.")
    command.add_argument("name", metavar="NAME", help="the user's name")
    command.add_argument("--mechanism", action="append", choices=MECHANISMS,
                         help="a mechanism to make a credential for (repeatable; default: both)")
    command.add_argument("--iterations", type=iterations, default=ITERATIONS_DEFAULT, metavar="N",
                         help=f"SCRAM's hash iterations, {ITERATIONS_MIN} to {ITERATIONS_MAX} (default "
                              f"{ITERATIONS_DEFAULT})")
    source = command.add_mutually_exclusive_group()
    source.add_argument("--password-file", metavar="FILE",
                        help="read the password from FILE, one line (keep the file readable by you only)")
    source.add_argument("--password-stdin", action="store_true", help="read the password from standard input")


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    return run(args.func, args)
