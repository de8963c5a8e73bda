"""`martlet status`: what the cluster looks like from outside.

From Kafka (DescribeCluster, Metadata), so against any Kafka endpoint: the brokers and the
controller, and how many topics and partitions there are. From Martlet's HTTP API when it
answers (GET /api/v1/status): the version, memory used of its budget, the store (kind, location,
health, bytes not yet persisted), connections and uptime; and for every broker of a cluster
its HTTP address, the partitions it leads and its load (memory, connections, unpersisted
bytes, store health) as its own status tells it.
"""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from confluent_kafka import TopicCollection

from .common import (
    OK,
    admin_client,
    connection_args,
    exit_codes,
    http_address,
    human_bytes,
    martlet_http,
    metadata,
    print_json,
    print_table,
    run,
    wait_admin,
)

LOAD_FETCHES_MAX = 8  # brokers asked for their load at once

DESCRIPTION = ("Show the brokers (and which one is the controller), the topic and partition counts and, "
               "against Martlet with its HTTP API answering, the version, memory, store health, connections "
               "and uptime, and each broker's load.")


def status(args: argparse.Namespace) -> int:
    client = admin_client(args)
    cluster = wait_admin(client.describe_cluster(request_timeout=args.timeout), args, {}, "cannot describe the cluster")
    controller = cluster.controller.id if cluster.controller is not None else None
    brokers = [{"node_id": n.id, "host": n.host, "port": n.port, "controller": n.id == controller}
               for n in sorted(cluster.nodes, key=lambda n: n.id)]
    martlet = martlet_http(args, cluster.cluster_id)
    answer: dict[str, Any] = {"cluster_id": cluster.cluster_id, "controller": controller,
                              "brokers": _with_loads(brokers, martlet, args), **_counts(client, args), "martlet": martlet}
    if args.output == "json":
        print_json(answer)
    else:
        _print_status(answer)
    return OK


def _with_loads(brokers: list[dict[str, Any]], martlet: dict[str, Any] | None,
                args: argparse.Namespace) -> list[dict[str, Any]]:
    """Each broker with, from Martlet's HTTP API, its HTTP address, the partitions it leads and
    its load as its own status tells it (`load`, or null and `load_error` why not). The broker
    that answered fetches the others' (GET /api/v1/brokers/<id>/status), so only its port needs
    to be reachable from here."""
    if martlet is None:
        return [b | {"http": None, "partitions": None, "load": None, "load_error": None} for b in brokers]
    known = {b.get("node_id"): b for b in martlet.get("brokers", [])}
    with ThreadPoolExecutor(max_workers=min(LOAD_FETCHES_MAX, max(1, len(brokers)))) as pool:
        fetched = list(pool.map(lambda b: _status_of(b["node_id"], martlet, args), brokers))
    return [b | {"http": known.get(b["node_id"], {}).get("http"), "partitions": known.get(b["node_id"], {}).get("partitions"),
                 "load": None if status is None else _load(status), "load_error": error}
            for b, (status, error) in zip(brokers, fetched, strict=True)]


def _status_of(node_id: int, martlet: dict[str, Any], args: argparse.Namespace) -> tuple[dict[str, Any] | None, str | None]:
    """A broker's own status, or None and why not."""
    if node_id == martlet.get("node_id"):
        return martlet, None
    url = f"http://{http_address(args)}/api/v1/brokers/{node_id}/status"
    try:
        with urllib.request.urlopen(url, timeout=args.timeout) as answer:
            doc = json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return None, _error_text(error)
    except (urllib.error.URLError, OSError, ValueError) as error:
        return None, str(getattr(error, "reason", error))
    return (doc, None) if isinstance(doc, dict) else (None, "not a status document")


def _error_text(error: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(error.read())["error"])
    except (OSError, ValueError, KeyError, TypeError):
        return f"HTTP {error.code}"


def _load(status: dict[str, Any]) -> dict[str, Any]:
    """What the overview shows of a broker's load, from its status."""
    store = status.get("store") or {}
    return {"memory": status.get("memory"), "connections": status.get("connections"),
            "unpersisted_bytes": store.get("unpersisted_bytes"), "store_healthy": store.get("healthy"),
            "store_last_error": store.get("last_error"), "uptime_s": status.get("uptime_s"),
            "version": status.get("version")}


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
    """Kafka's view of the brokers; with Martlet's, each one's HTTP address, partitions led and load."""
    columns = ["BROKER", "ADDRESS", "CONTROLLER"]
    rows: list[list[object]] = [[b["node_id"], f"{b['host']}:{b['port']}", "yes" if b["controller"] else ""]
                                for b in brokers]
    if martlet is not None:
        columns += ["HTTP", "PARTITIONS", "MEMORY", "CONNECTIONS", "UNPERSISTED", "STORE"]
        rows = [row + [b["http"], b["partitions"], *_load_cells(b)] for row, b in zip(rows, brokers, strict=True)]
    print_table(None, columns, rows)


def _load_cells(broker: dict[str, Any]) -> list[object]:
    load = broker["load"]
    if load is None:
        return [f"not answering: {broker['load_error']}", "", "", ""]
    memory = load.get("memory") or {}
    store = "healthy" if load.get("store_healthy") else f"UNHEALTHY: {load.get('store_last_error') or 'unknown error'}"
    return [f"{human_bytes(memory.get('used_bytes'))} of {human_bytes(memory.get('budget_bytes'))}",
            load.get("connections"), human_bytes(load.get("unpersisted_bytes")), store]


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
    command = argparse.ArgumentParser(prog="martlet status", description=DESCRIPTION, epilog=exit_codes())
    command.set_defaults(func=status)
    connection_args(command)
    return command


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    return run(args.func, args)
