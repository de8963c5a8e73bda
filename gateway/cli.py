"""The `martlet` command."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from dataclasses import replace

from ..engine.api import errors
from .config import ConfigError, load, with_listen, with_store


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["compat"]:
        from ..compat.cli import main as compat_main

        return compat_main(argv[1:])
    if argv[:1] == ["bench"]:
        from ..compat.bench.cli import main as bench_main

        return bench_main(argv[1:])
    if argv[:1] == ["cluster"]:
        from ..compat.cluster_cli import main as cluster_main

        return cluster_main(argv[1:])
    args = _parser().parse_args(argv)
    if args.command == "config":
        from .config_keys import defaults_toml

        print(defaults_toml(), end="")
        return 0
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
    serve_cmd.add_argument("--config", metavar="FILE", help="TOML config file")
    commands.add_parser("config", help="print every config file key with its default")
    commands.add_parser("compat", help="compatibility suite and reference services (see: martlet compat -h)")
    commands.add_parser("bench", help="Martlet and Apache Kafka side by side (see: martlet bench -h)")
    commands.add_parser("cluster", help="a cluster on this machine: up, status, down (see: martlet cluster -h)")
    return parser


def serve(args: argparse.Namespace) -> int:
    from .app import Broker, run_until_signalled

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load(args.config)
        if args.listen:
            config = with_listen(config, args.listen)
        if args.advertised:
            config = replace(config, advertised=args.advertised)
        if args.data_dir:
            config = replace(config, data_dir=args.data_dir)
        if args.store:
            config = with_store(config, args.store)
        broker = Broker(config)
    except (ConfigError, errors.DataDirLocked, OSError) as error:
        print(f"martlet: {error}", file=sys.stderr)
        return 2
    _use_uvloop()
    asyncio.run(run_until_signalled(broker))
    return 0


def _use_uvloop() -> None:
    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


if __name__ == "__main__":
    sys.exit(main())
