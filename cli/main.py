"""The `martlet` command."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

from ..broker.logs import FORMATS, LEVELS
from ..broker.logs import configure as configure_logs

if TYPE_CHECKING:  # the engine loads only for the commands that run one: the tools start faster without it
    from ..broker.config import ServeConfig
    from ..engine.api import Store

# The operator's commands (tools/): each speaks the Kafka protocol to --bootstrap.
TOOLS = {
    "topic": "create, list, describe, alter, delete topics and add partitions",
    "group": "list, describe, reset the offsets of and delete consumer groups",
    "produce": "records from standard input or a file to a topic (one per line)",
    "consume": "records of a topic to standard output",
    "status": "the brokers, topics, partitions, memory and store health",
    "user": "create, list and delete the SCRAM users of SASL listeners",
    "completion": "a shell completion script (bash or zsh)",
    "certs": "a development CA with broker and client certificates, for TLS",
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["compat"]:
        from ..compat.cli import main as compat_main

        return compat_main(argv[1:])
    if argv[:1] == ["bench"]:
        from ..compat.bench.cli import main as bench_main

        return bench_main(argv[1:])
    if argv[:1] == ["export"]:
        from ..connectors.export import main as export_main

        return export_main(argv[1:])
    if argv[:1] == ["cluster"]:
        from ..compat.cluster_cli import main as cluster_main

        return cluster_main(argv[1:])
    if argv[:1] and argv[0] in TOOLS:
        import importlib

        tool = importlib.import_module(f"martlet.tools.{argv[0]}")
        return int(tool.main(argv[1:]))
    args = _parser().parse_args(argv)
    if args.command == "config":
        from ..broker.config_keys import defaults_toml

        print(defaults_toml(), end="")
        return 0
    if args.command == "admin":
        return run_admin(args)
    return serve(args)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="martlet", description="A Kafka-compatible streaming system.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve_cmd = commands.add_parser("serve", help="run a broker (embedded defaults: local disk)")
    serve_cmd.add_argument("--listen", metavar="HOST:PORT", help="address to listen on (127.0.0.1:9092)")
    serve_cmd.add_argument("--advertised", metavar="HOST:PORT", help="address clients are told to use")
    serve_cmd.add_argument("--data-dir", metavar="DIR", help="where data lives (./martlet-data)")
    serve_cmd.add_argument("--store", metavar="URL",
                           help="keep the data on HDFS: hdfs://HOST:PORT/PATH (default: local, in --data-dir)")
    serve_cmd.add_argument("--zookeeper", metavar="HOST:PORT[/CHROOT]",
                           help="join the cluster coordinated there (default: the embedded single node)")
    serve_cmd.add_argument("--http", metavar="HOST:PORT",
                           help='the HTTP port: API, /metrics, web console (127.0.0.1:9644; "off": none)')
    serve_cmd.add_argument("--udp", metavar="HOST:PORT",
                           help='take datagrams into topics there (gateway/udp.py; default: none, "off": none)')
    serve_cmd.add_argument("--config", metavar="FILE", help="TOML config file")
    serve_cmd.add_argument("--insecure", action="store_true",
                           help="serve plaintext, unauthenticated ports on addresses other machines reach")
    _log_args(serve_cmd)
    admin_cmd = commands.add_parser("admin", help="run a cluster admin: places partitions on brokers (one leads)")
    admin_cmd.add_argument("--zookeeper", metavar="HOST:PORT[/CHROOT]", required=True)
    admin_cmd.add_argument("--store", metavar="URL", required=True,
                           help="the cluster's store: hdfs://HOST:PORT/PATH, or a local folder shared by its brokers")
    admin_cmd.add_argument("--session-ms", type=int, default=3000,
                           help="ZooKeeper session timeout: a standby leads this long after the leader dies (3000)")
    _log_args(admin_cmd)
    commands.add_parser("config", help="print every config file key with its default")
    commands.add_parser("compat", help="compatibility suite and reference services (see: martlet compat -h)")
    commands.add_parser("bench", help="Martlet and Apache Kafka side by side (see: martlet bench -h)")
    commands.add_parser("export", help="a topic's records to Parquet files (see: martlet export -h)")
    commands.add_parser("cluster", help="a cluster on this machine: up, status, down (see: martlet cluster -h)")
    for name, summary in TOOLS.items():
        commands.add_parser(name, help=f"{summary} (see: martlet {name} -h)")
    return parser


def _log_args(command: argparse.ArgumentParser) -> None:
    command.add_argument("--log-format", choices=FORMATS, default="text",
                         help="log lines on standard error: text (default) or json, one object per line")
    command.add_argument("--log-level", choices=LEVELS, default="info", help="the least important lines logged (info)")


def serve(args: argparse.Namespace) -> int:
    from ..broker.app import Broker, run_until_signalled
    from ..broker.config import ConfigError
    from ..engine.api import errors
    from ..gateway.connection_limits import raise_file_limit

    configure_logs(args.log_format, args.log_level)
    try:
        broker = Broker(_serve_config(args))
    except (ConfigError, errors.DataDirLocked, OSError) as error:
        print(f"martlet: {error}", file=sys.stderr)
        return 2
    _use_uvloop()
    raise_file_limit()  # each connection takes a file: thousands of clients need more than a default 1024
    asyncio.run(run_until_signalled(broker))
    return 0


def _serve_config(args: argparse.Namespace) -> ServeConfig:
    """The config file with the flags applied; refused (ConfigError) when it would serve a
    plaintext, unauthenticated door to other machines without --insecure."""
    from ..broker.config import load, with_advertised, with_http, with_listen, with_store, with_udp

    config = load(args.config)
    if args.listen:
        config = with_listen(config, args.listen)
    if args.advertised:
        config = with_advertised(config, args.advertised)
    if args.data_dir:
        config = replace(config, data_dir=args.data_dir)
    if args.store:
        config = with_store(config, args.store)
    if args.zookeeper:
        config = replace(config, zookeeper=args.zookeeper)
    if args.http is not None:
        config = with_http(config, args.http)
    if args.udp is not None:
        config = with_udp(config, args.udp)
    if args.insecure:
        config = replace(config, insecure=True)
    _refuse_exposed(config)
    return config


def _refuse_exposed(config: ServeConfig) -> None:
    from ..broker.config import ConfigError, exposed, missing_inter_broker_login, unauthenticated_udp

    why = unauthenticated_udp(config) or missing_inter_broker_login(config)
    if why is not None:
        raise ConfigError(why)
    doors = " and ".join(exposed(config))
    if doors and not config.insecure:
        raise ConfigError(f"{doors}: anyone who reaches them could read, write and delete everything. Listen on "
                          "127.0.0.1, or serve Kafka listeners with TLS (README: Securing Martlet), or pass "
                          "--insecure (insecure = true in [gateway]) if that is what you want")
    if doors:
        logging.getLogger(__name__).warning("serving %s without TLS or authentication (--insecure)", doors)


def run_admin(args: argparse.Namespace) -> int:
    import signal

    from ..broker.config import ConfigError
    from ..engine.api import admin

    configure_logs(args.log_format, args.log_level)
    try:
        store = _admin_store(args.store)
        process = admin(args.zookeeper, store, args.session_ms)
    except (ConfigError, OSError, ValueError) as error:
        print(f"martlet: {error}", file=sys.stderr)
        return 2
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda _sig, _frame: process.stop())
    process.run()
    return 0


def _admin_store(url: str) -> Store:
    """The admin only reads the store (the catalog): read-only on HDFS, so it never takes a lease."""
    from ..broker.config import split_hdfs_url
    from ..engine.api import LocalStore, hdfs_store

    if "://" not in url:
        return LocalStore(url)
    address, root = split_hdfs_url(url)
    try:
        return hdfs_store(address, root, read_only=True)
    except Exception as error:  # hdfs-native reports an unreachable NameNode as RuntimeError
        raise OSError(f"cannot use HDFS store {url}: {error}") from None


def _use_uvloop() -> None:
    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())

