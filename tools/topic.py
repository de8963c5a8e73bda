"""`martlet topic`: create, list, describe, alter and delete topics, and add partitions.

Each subcommand is one Kafka admin request (CreateTopics, Metadata, ListOffsets,
DescribeConfigs, IncrementalAlterConfigs, DeleteTopics, CreatePartitions) through librdkafka, so
it works against any Kafka endpoint. `describe` adds what only Martlet knows (each partition's
logical slot range, its checkpoint C and unpersisted bytes) when Martlet's HTTP API answers.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import Future
from typing import Any
from urllib.parse import quote

from confluent_kafka import TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from .common import (
    OK,
    USAGE,
    Failed,
    KafkaFailed,
    admin_client,
    cluster_id,
    exit_codes,
    http_get,
    human_bytes,
    martlet_http,
    metadata,
    plural,
    print_json,
    print_table,
    run,
    subcommand,
    wait_admin,
)

METADATA_RETRY_S = 0.1  # between Metadata requests while a created topic is not shown yet
DESCRIPTION = "Create, list, describe, alter and delete topics, and add partitions to them."
EXAMPLES = """examples:
  martlet topic create orders --partitions 6 --config retention.ms=604800000
  martlet topic list
  martlet topic describe orders
  martlet topic alter orders --config cleanup.policy=compact --delete-config retention.ms
  martlet topic add-partitions orders --total 12
  martlet topic delete orders

Each subcommand has its own help: martlet topic create -h. The broker is --bootstrap
(default $MARTLET_BOOTSTRAP, else 127.0.0.1:9092).

""" + exit_codes("the broker refused (an unknown topic, one that exists, a bad config)")


def _phrases(topic: str) -> dict[str, str]:
    """How Kafka's refusals about `topic` read to a person, where the broker's own text (kept for
    every other error) says less."""
    return {
        "TOPIC_ALREADY_EXISTS": f"topic {topic} already exists",
        "UNKNOWN_TOPIC_OR_PART": f"topic {topic} does not exist",
        "UNKNOWN_TOPIC_ID": f"topic {topic} does not exist",
    }


# -- create ------------------------------------------------------------------------------------

def config_pairs(pairs: list[str] | None) -> dict[str, str]:
    """KEY=VALUE strings (checked by config_pair) as a dict."""
    return dict(pair.split("=", 1) for pair in pairs or [])


def config_pair(text: str) -> str:
    """argparse's type= of --config: a pair without "=" is a usage error (exit 2)."""
    if "=" not in text or text.startswith("="):
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return text


def create(args: argparse.Namespace) -> int:
    client = admin_client(args)
    topic = NewTopic(args.name, num_partitions=args.partitions, replication_factor=args.replication_factor,
                     config=config_pairs(args.config))
    future = client.create_topics([topic], request_timeout=args.timeout)[args.name]
    try:
        wait_admin(future, args, _phrases(args.name), f"cannot create topic {args.name}")
        created = True
    except KafkaFailed as failure:
        if not (args.if_not_exists and failure.error_name == "TOPIC_ALREADY_EXISTS"):
            raise
        created = False
    partitions = wait_partitions(client, args, args.name)
    if args.output == "json":
        print_json({"topic": args.name, "created": created, "partitions": partitions})
    else:
        count = "" if partitions is None else f" ({plural(partitions, 'partition')})"
        print(f"{'created' if created else 'kept existing'} topic {args.name}{count}")
    return OK


def wait_partitions(client: AdminClient, args: argparse.Namespace, name: str) -> int | None:
    """The topic's partition count once Metadata shows it (a new topic may take a moment to reach
    the broker answering), or None after --timeout: then `martlet topic create` still succeeded."""
    deadline = time.monotonic() + args.timeout
    while True:
        found = metadata(client, args, name).topics.get(name)
        if found is not None and found.error is None and found.partitions:
            return len(found.partitions)
        if time.monotonic() >= deadline:
            return None
        time.sleep(METADATA_RETRY_S)


# -- list --------------------------------------------------------------------------------------

def list_topics(args: argparse.Namespace) -> int:
    client = admin_client(args)
    described = describe_all(client, args, sorted(metadata(client, args).topics))
    shown = [d for d in described if args.internal or not d.is_internal]
    records = _http_records(args) if martlet_http(args, cluster_id(client, args)) else None
    rows = [_list_row(d, records) for d in shown]
    if args.output == "json":
        print_json({"topics": rows})
    else:
        columns = ["TOPIC", "PARTITIONS", "REPLICAS", "INTERNAL"] + (["RECORDS"] if records is not None else [])
        print_table(None, columns, [list(row.values()) for row in rows])
    return OK


def describe_all(client: AdminClient, args: argparse.Namespace, names: list[str]) -> list[Any]:
    """TopicDescriptions of `names`, in that order (one DescribeTopics call)."""
    if not names:
        return []
    futures = client.describe_topics(TopicCollection(names), request_timeout=args.timeout)
    return [wait_admin(futures[name], args, _phrases(name), f"cannot describe topic {name}") for name in names]


def _http_records(args: argparse.Namespace) -> dict[str, int] | None:
    answer = http_get(args, "/api/v1/topics")
    if not isinstance(answer, dict):
        return None
    return {topic["name"]: topic.get("records") for topic in answer.get("topics", [])}


def _list_row(description: Any, records: dict[str, int] | None) -> dict[str, object]:
    partitions = description.partitions
    row: dict[str, object] = {"name": description.name, "partitions": len(partitions),
                              "replication_factor": len(partitions[0].replicas) if partitions else 0,
                              "internal": description.is_internal}
    if records is not None:
        row["records"] = records.get(description.name)
    return row


# -- describe ----------------------------------------------------------------------------------

def describe(args: argparse.Namespace) -> int:
    client = admin_client(args)
    described = describe_all(client, args, args.names)
    martlet = martlet_http(args, cluster_id(client, args)) is not None
    topics = [_describe_one(client, args, d, martlet) for d in described]
    if args.output == "json":
        print_json({"topics": topics})
    else:
        for topic in topics:
            _print_topic(topic)
    return OK


def _describe_one(client: AdminClient, args: argparse.Namespace, description: Any, martlet_api: bool) -> dict[str, Any]:
    name = description.name
    ids = [p.id for p in description.partitions]
    starts = _offsets(client, args, name, ids, OffsetSpec.earliest())
    ends = _offsets(client, args, name, ids, OffsetSpec.latest())
    martlet = _martlet_partitions(args, name) if martlet_api else {}
    partitions = [_partition(p, starts[p.id], ends[p.id], martlet.get(p.id)) for p in description.partitions]
    return {"name": name, "topic_id": str(description.topic_id), "internal": description.is_internal,
            "partitions": partitions, "configs": _overridden_configs(client, args, name)}


def _offsets(client: AdminClient, args: argparse.Namespace, topic: str, partitions: list[int],
             spec: OffsetSpec) -> dict[int, int]:
    """One ListOffsets answer per partition: `spec` (earliest, latest, a timestamp) as an offset."""
    if not partitions:
        return {}
    futures = client.list_offsets({TopicPartition(topic, p): spec for p in partitions}, request_timeout=args.timeout)
    action = f"cannot list the offsets of topic {topic}"
    return {tp.partition: int(wait_admin(f, args, _phrases(topic), action).offset) for tp, f in futures.items()}


def _martlet_partitions(args: argparse.Namespace, topic: str) -> dict[int, dict[str, Any]]:
    """Martlet's own facts per partition (slots, C, unpersisted bytes), or {} where no Martlet answers."""
    answer = http_get(args, f"/api/v1/topics/{quote(topic, safe='')}")
    if not isinstance(answer, dict):
        return {}
    return {int(p["partition"]): p for p in answer.get("partitions", [])}


def _partition(info: Any, log_start: int, high_watermark: int, martlet: dict[str, Any] | None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "partition": info.id, "leader": info.leader.id if info.leader is not None else None,
        "replicas": [node.id for node in info.replicas], "isr": [node.id for node in info.isr],
        "log_start_offset": log_start, "high_watermark": high_watermark,
    }
    if martlet is not None:
        row["slots"] = martlet.get("slots")
        row["checkpoint"] = martlet.get("checkpoint")
        row["unpersisted_bytes"] = martlet.get("unpersisted_bytes")
    return row


def _overridden_configs(client: AdminClient, args: argparse.Namespace, topic: str) -> dict[str, str | None]:
    """The topic's configs that are not the broker's defaults (as kafka-topics --describe shows)."""
    resource = ConfigResource(ResourceType.TOPIC, topic)
    future = client.describe_configs([resource], request_timeout=args.timeout)[resource]
    entries = wait_admin(future, args, _phrases(topic), f"cannot describe the configs of topic {topic}")
    return {name: (None if e.is_sensitive else e.value) for name, e in sorted(entries.items()) if not e.is_default}


def _print_topic(topic: dict[str, Any]) -> None:
    partitions = topic["partitions"]
    martlet = any("slots" in p for p in partitions)
    columns = ["PARTITION", "LEADER", "REPLICAS", "ISR", "LOG START", "HIGH WATERMARK"]
    columns += ["SLOTS", "C", "UNPERSISTED"] if martlet else []
    rows = [_partition_cells(p, martlet) for p in partitions]
    internal = ", internal" if topic["internal"] else ""
    print(f"Topic {topic['name']} (id {topic['topic_id']}, {plural(len(partitions), 'partition')}{internal})")
    print_table(None, columns, rows)
    configs = topic["configs"]
    if configs:
        print_table(None, ["CONFIG (NOT DEFAULT)", "VALUE"], sorted(configs.items()))


def _partition_cells(p: dict[str, Any], martlet: bool) -> list[object]:
    cells: list[object] = [p["partition"], p["leader"], _ids(p["replicas"]), _ids(p["isr"]),
                           p["log_start_offset"], p["high_watermark"]]
    if martlet:
        slots = p.get("slots")
        cells += [f"{slots[0]}-{slots[1]}" if slots else "", p.get("checkpoint"), human_bytes(p.get("unpersisted_bytes"))]
    return cells


def _ids(ids: list[int]) -> str:
    return ",".join(str(i) for i in ids)


# -- alter, delete, add-partitions -------------------------------------------------------------

def alter(args: argparse.Namespace) -> int:
    if not args.config and not args.delete_config:
        raise Failed("nothing to change: give --config KEY=VALUE or --delete-config KEY", USAGE)
    client = admin_client(args)
    sets = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in config_pairs(args.config).items()]
    deletes = [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in args.delete_config or []]
    resource = ConfigResource(ResourceType.TOPIC, args.name, incremental_configs=sets + deletes)
    future = client.incremental_alter_configs([resource], request_timeout=args.timeout)[resource]
    wait_admin(future, args, _phrases(args.name), f"cannot alter the configs of topic {args.name}")
    changed = {"topic": args.name, "set": config_pairs(args.config), "deleted": args.delete_config or []}
    if args.output == "json":
        print_json(changed)
    else:
        print(f"altered topic {args.name}: " + ", ".join(
            [f"{k}={v}" for k, v in changed["set"].items()] + [f"{k} back to default" for k in changed["deleted"]]))
    return OK


def delete(args: argparse.Namespace) -> int:
    client = admin_client(args)
    futures = client.delete_topics(args.names, request_timeout=args.timeout, operation_timeout=args.timeout)
    outcomes = {name: _deleted(futures[name], args, name) for name in args.names}
    deleted = [name for name, failure in outcomes.items() if failure is None]
    absent = [name for name, failure in outcomes.items() if failure is not None and _excused(failure, args)]
    if args.output == "json":
        print_json({"deleted": deleted, "absent": absent})
    else:
        for name in deleted:
            print(f"deleted topic {name}")
    for failure in outcomes.values():
        if failure is not None and not _excused(failure, args):
            raise failure
    return OK


def _deleted(future: Future[Any], args: argparse.Namespace, name: str) -> KafkaFailed | None:
    try:
        wait_admin(future, args, _phrases(name), f"cannot delete topic {name}")
    except KafkaFailed as failure:
        return failure
    return None


def _excused(failure: KafkaFailed, args: argparse.Namespace) -> bool:
    return bool(args.if_exists) and failure.error_name == "UNKNOWN_TOPIC_OR_PART"


def add_partitions(args: argparse.Namespace) -> int:
    client = admin_client(args)
    future = client.create_partitions([NewPartitions(args.name, args.total)], request_timeout=args.timeout,
                                      operation_timeout=args.timeout)[args.name]
    wait_admin(future, args, _phrases(args.name), f"cannot add partitions to topic {args.name}")
    if args.output == "json":
        print_json({"topic": args.name, "partitions": args.total})
    else:
        print(f"topic {args.name} now has {plural(args.total, 'partition')}")
    return OK


# -- command line ------------------------------------------------------------------------------

def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="martlet topic", description=DESCRIPTION, epilog=EXAMPLES,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    subs = top.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    _create_parser(subs)
    command = subcommand(subs, "list", list_topics, "list the topics",
                          "List the topics with their partition counts (and record counts where Martlet answers).")
    command.add_argument("--internal", action="store_true", help="also list internal topics (__consumer_offsets, ...)")
    command = subcommand(subs, "describe", describe, "show partitions, offsets and configs of topics",
                          "Show each partition's leader, replicas, in-sync replicas, log start offset and high "
                          "watermark, and the configs set on the topic. Against Martlet (its HTTP API answering) "
                          "also each partition's logical slot range, checkpoint C (persisted up to) and "
                          "unpersisted bytes.")
    command.add_argument("names", nargs="+", metavar="NAME", help="topic(s) to describe")
    _alter_parser(subs)
    command = subcommand(subs, "delete", delete, "delete topics and their records",
                          "Delete topics with all their records. This cannot be undone.")
    command.add_argument("names", nargs="+", metavar="NAME", help="topic(s) to delete")
    command.add_argument("--if-exists", action="store_true", help="a topic that does not exist is not an error")
    command = subcommand(subs, "add-partitions", add_partitions, "grow a topic to more partitions",
                          "Grow a topic to --total partitions. Partitions cannot be removed, and keyed "
                          "records may land in a different partition afterwards.")
    command.add_argument("name", metavar="NAME", help="the topic")
    command.add_argument("--total", type=int, required=True, metavar="N", help="the partition count after the change")
    return top


def _create_parser(subs: Any) -> None:
    command = subcommand(subs, "create", create, "create a topic",
                          "Create a topic. Without --partitions and --replication-factor the broker's "
                          "defaults apply (num.partitions, default.replication.factor).")
    command.add_argument("name", metavar="NAME", help="the topic's name")
    command.add_argument("--partitions", "-p", type=int, default=-1, metavar="N", help="partition count")
    command.add_argument("--replication-factor", "-r", type=int, default=-1, metavar="R",
                         help="replicas listed per partition, up to the number of brokers (Martlet keeps one "
                              "copy, in its store, whatever the factor)")
    command.add_argument("--config", "-c", action="append", type=config_pair, metavar="KEY=VALUE",
                         help="a topic config such as retention.ms=86400000 (repeatable)")
    command.add_argument("--if-not-exists", action="store_true", help="an existing topic is not an error")


def _alter_parser(subs: Any) -> None:
    command = subcommand(subs, "alter", alter, "set or remove topic configs",
                          "Set configs on a topic, or remove them so the broker's default applies again. "
                          "Configs not named are left as they are.")
    command.add_argument("name", metavar="NAME", help="the topic")
    command.add_argument("--config", "-c", action="append", type=config_pair, metavar="KEY=VALUE",
                         help="set a config (repeatable)")
    command.add_argument("--delete-config", "-d", action="append", metavar="KEY",
                         help="remove a config, back to the default (repeatable)")


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    return run(args.func, args)
