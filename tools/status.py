"""`martlet status`: what the cluster looks like from outside.

From Kafka (DescribeCluster, Metadata), so against any Kafka endpoint: the brokers and the
controller, and how many topics and partitions there are. From Martlet's HTTP API when it
answers (GET /api/v1/status): the version, memory used of its budget, the store (kind, location,
health, bytes not yet persisted), connections and uptime.
"""

from __future__ import annotations

import argparse
from typing import Any

from confluent_kafka import TopicCollection

from .common import (
    OK,
    admin_client,
    connection_args,
    human_bytes,
    martlet_http,
    metadata,
    print_json,
    print_table,
    run,
    wait_admin,
)

DESCRIPTION = ("Show the brokers (and which one is the controller), the topic and partition counts and, "
               "against Martlet with its HTTP API answering, the version, memory, store health, connections "
               "and uptime.")


def status(args: argparse.Namespace) -> int:
    client = admin_client(args)
    cluster = wait_admin(client.describe_cluster(request_timeout=args.timeout), args, {}, "cannot describe the cluster")
    controller = cluster.controller.id if cluster.controller is not None else None
    brokers = [{"node_id": n.id, "host": n.host, "port": n.port, "controller": n.id == controller}
               for n in sorted(cluster.nodes, key=lambda n: n.id)]
    answer: dict[str, Any] = {"cluster_id": cluster.cluster_id, "controller": controller, "brokers": brokers,
                              **_counts(client, args), "martlet": martlet_http(args, cluster.cluster_id)}
    if args.output == "json":
        print_json(answer)
    else:
        _print_status(answer)
    return OK


def _counts(client: Any, args: argparse.Namespace) -> dict[str, int]:
    """Topics and partitions, internal ones (__consumer_offsets, ...) counted apart."""
    names = sorted(metadata(client, args).topics)
    futures = client.describe_topics(TopicCollection(names), request_timeout=args.timeout) if names else {}
    described = [wait_admin(futures[name], args, {}, f"cannot describe topic {name}") for name in names]
    user = [d for d in described if not d.is_internal]
    internal = [d for d in described if d.is_internal]
    return {"topics": len(user), "partitions": sum(len(d.partitions) for d in user),
            "internal_topics": len(internal), "internal_partitions": sum(len(d.partitions) for d in internal)}


def _print_status(answer: dict[str, Any]) -> None:
    print(f"Cluster {answer['cluster_id']}")
    _print_brokers(answer["brokers"], answer["martlet"])
    facts: list[tuple[str, object]] = [
        ("topics", answer["topics"]), ("partitions", answer["partitions"]),
        ("internal topics", f"{answer['internal_topics']} ({answer['internal_partitions']} partitions)"),
    ]
    martlet = answer["martlet"]
    unknown = [("martlet", "no Martlet HTTP API of this cluster answered (see --http)")]
    facts += _martlet_facts(martlet) if martlet is not None else unknown
    print_table(None, ["", "VALUE"], facts)


def _print_brokers(brokers: list[dict[str, Any]], martlet: dict[str, Any] | None) -> None:
    """Kafka's view of the brokers; with Martlet's, each one's HTTP address and partitions led."""
    columns = ["BROKER", "ADDRESS", "CONTROLLER"]
    rows: list[list[object]] = [[b["node_id"], f"{b['host']}:{b['port']}", "yes" if b["controller"] else ""]
                                for b in brokers]
    if martlet is not None:
        known = {b.get("node_id"): b for b in martlet.get("brokers", [])}
        columns += ["HTTP", "PARTITIONS"]
        rows = [row + [known.get(row[0], {}).get("http"), known.get(row[0], {}).get("partitions")] for row in rows]
    print_table(None, columns, rows)


def _martlet_facts(martlet: dict[str, Any]) -> list[tuple[str, object]]:
    memory = martlet.get("memory") or {}
    store = martlet.get("store") or {}
    health = "healthy" if store.get("healthy") else f"UNHEALTHY: {store.get('last_error') or 'unknown error'}"
    return [
        ("version", martlet.get("version")),
        ("node", martlet.get("node_id")),
        ("groups", martlet.get("groups")),
        ("memory", f"{human_bytes(memory.get('used_bytes'))} used of {human_bytes(memory.get('budget_bytes'))}"),
        ("store", f"{store.get('kind')} {store.get('location')}"),
        ("store health", health),
        ("unpersisted", human_bytes(store.get("unpersisted_bytes"))),
        ("connections", martlet.get("connections")),
        ("uptime", _duration(martlet.get("uptime_s"))),
    ]


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}d {text}" if days else text


def parser() -> argparse.ArgumentParser:
    command = argparse.ArgumentParser(prog="martlet status", description=DESCRIPTION)
    command.set_defaults(func=status)
    connection_args(command)
    return command


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    return run(args.func, args)
