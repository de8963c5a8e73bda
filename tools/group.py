"""`martlet group`: list, describe, reset the offsets of and delete consumer groups.

Kafka admin requests through librdkafka (ListGroups, DescribeGroups, OffsetFetch, ListOffsets,
OffsetCommit, DeleteGroups), so it works against any Kafka endpoint. A group's lag on a
partition is the partition's high watermark minus the group's committed offset there.

reset-offsets behaves as kafka-consumer-groups.sh --reset-offsets: without --execute it only
prints the plan; it refuses a group with members (their commits would overwrite the reset);
--to-offset is clamped to the partition's log start and high watermark; --to-timestamp takes
the first offset at or after the time, or the high watermark when there is none.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from .common import (
    OK,
    REFUSED,
    Failed,
    KafkaFailed,
    admin_client,
    call_admin,
    cluster_id,
    exit_codes,
    http_get,
    kafka_failed,
    martlet_http,
    metadata,
    print_json,
    print_table,
    run,
    subcommand,
    timestamp_ms,
    wait_admin,
)

DESCRIPTION = "List, describe, reset the committed offsets of and delete consumer groups."
EXAMPLES = """examples:
  martlet group list
  martlet group describe billing
  martlet group reset-offsets billing --topic orders --to-earliest            (prints the plan)
  martlet group reset-offsets billing --topic orders:0,1 --to-offset 100 --execute
  martlet group delete billing

Each subcommand has its own help: martlet group reset-offsets -h.

""" + exit_codes("refused (an unknown group, a group with members, ...)")

# Kafka's own spelling of group states (as kafka-consumer-groups.sh and DescribeGroups show them).
STATES = {
    ConsumerGroupState.UNKNOWN: "Unknown",
    ConsumerGroupState.PREPARING_REBALANCING: "PreparingRebalance",
    ConsumerGroupState.COMPLETING_REBALANCING: "CompletingRebalance",
    ConsumerGroupState.STABLE: "Stable",
    ConsumerGroupState.DEAD: "Dead",
    ConsumerGroupState.EMPTY: "Empty",
}


def _phrases(group: str) -> dict[str, str]:
    return {
        "GROUP_ID_NOT_FOUND": f"group {group} does not exist",
        "NON_EMPTY_GROUP": f"group {group} has active members: stop its consumers first",
        "UNKNOWN_TOPIC_OR_PART": "unknown topic or partition",
    }


def _state(value: Any) -> str:
    return STATES.get(value, str(value))


# -- list --------------------------------------------------------------------------------------

def list_groups(args: argparse.Namespace) -> int:
    client = admin_client(args)
    result = wait_admin(client.list_consumer_groups(request_timeout=args.timeout), args, {}, "cannot list groups")
    for error in result.errors:  # a broker that could not answer (the others' groups are in result.valid)
        raise kafka_failed(error.args[0], {}, "cannot list groups") if isinstance(error, KafkaException) else Failed(
            f"cannot list groups: {error}")
    lags = _http_lags(args) if martlet_http(args, cluster_id(client, args)) else None
    rows = [_listing(g, lags) for g in sorted(result.valid, key=lambda g: g.group_id)]
    if args.output == "json":
        print_json({"groups": rows})
    else:
        columns = ["GROUP", "STATE", "TYPE"] + (["MEMBERS", "LAG"] if lags is not None else [])
        print_table(None, columns, [list(row.values()) for row in rows])
    return OK


def _http_lags(args: argparse.Namespace) -> dict[str, dict[str, Any]] | None:
    answer = http_get(args, "/api/v1/groups")
    if not isinstance(answer, dict):
        return None
    return {g["group_id"]: g for g in answer.get("groups", [])}


def _listing(listing: Any, martlet: dict[str, dict[str, Any]] | None) -> dict[str, object]:
    kind = "simple" if listing.is_simple_consumer_group else getattr(listing.type, "name", "").lower() or "consumer"
    row: dict[str, object] = {"group_id": listing.group_id, "state": _state(listing.state), "type": kind}
    if martlet is not None:
        known = martlet.get(listing.group_id, {})
        row["members"] = known.get("members")
        row["lag"] = known.get("lag")
    return row


# -- describe ----------------------------------------------------------------------------------

def describe(args: argparse.Namespace) -> int:
    client = admin_client(args)
    groups = [_described(client, args, group) for group in args.groups]
    if args.output == "json":
        print_json({"groups": groups})
    else:
        for group in groups:
            _print_group(group)
    return OK


def _described(client: AdminClient, args: argparse.Namespace, group: str) -> dict[str, Any]:
    description = describe_group(client, args, group)
    committed = committed_offsets(client, args, group)
    if description.state == ConsumerGroupState.DEAD and not description.members and not committed:
        raise KafkaFailed(f"group {group} does not exist (GROUP_ID_NOT_FOUND)", REFUSED, "GROUP_ID_NOT_FOUND")
    members = [_member(m) for m in description.members]
    owners = {(a["topic"], a["partition"]): m["member_id"] for m in members for a in m["assignment"]}
    partitions = sorted(set(committed) | set(owners))
    ends = _known_high_watermarks(client, args, partitions)
    offsets = [_offset_row(tp, committed.get(tp), ends.get(tp), owners.get(tp)) for tp in partitions]
    return {"group_id": group, "state": _state(description.state),
            "protocol_type": "" if description.is_simple_consumer_group else "consumer",
            "protocol": description.partition_assignor, "type": getattr(description.type, "name", "").lower(),
            "coordinator": description.coordinator.id if description.coordinator else None,
            "members": members, "offsets": offsets,
            "lag": sum(row["lag"] for row in offsets if row["lag"] is not None)}


def describe_group(client: AdminClient, args: argparse.Namespace, group: str) -> Any:
    """The group's ConsumerGroupDescription (DescribeGroups, or ConsumerGroupDescribe for KIP-848 groups)."""
    return call_admin(lambda: client.describe_consumer_groups([group], request_timeout=args.timeout)[group], args,
                      _phrases(group), f"cannot describe group {group}")


def _member(member: Any) -> dict[str, Any]:
    assigned = member.assignment.topic_partitions if member.assignment else []
    return {"member_id": member.member_id, "client_id": member.client_id, "host": member.host,
            "assignment": [{"topic": tp.topic, "partition": tp.partition}
                           for tp in sorted(assigned, key=lambda tp: (tp.topic, tp.partition))]}


def _offset_row(tp: tuple[str, int], committed: int | None, end: int | None, owner: str | None) -> dict[str, Any]:
    lag = end - committed if end is not None and committed is not None else None
    return {"topic": tp[0], "partition": tp[1], "committed": committed, "high_watermark": end, "lag": lag,
            "member_id": owner}


def committed_offsets(client: AdminClient, args: argparse.Namespace, group: str,
                      partitions: list[tuple[str, int]] | None = None) -> dict[tuple[str, int], int | None]:
    """The group's committed offset per partition (None where it has none): of every partition it
    committed to, or of `partitions`."""
    asked = [TopicPartition(t, p) for t, p in partitions] if partitions is not None else None
    request = [ConsumerGroupTopicPartitions(group, asked)]
    answer = call_admin(lambda: client.list_consumer_group_offsets(request, request_timeout=args.timeout)[group], args,
                        _phrases(group), f"cannot fetch the offsets of group {group}")
    offsets: dict[tuple[str, int], int | None] = {}
    for tp in answer.topic_partitions:
        if tp.error is not None:
            raise Failed(f"cannot fetch the offsets of group {group} on {tp.topic}:{tp.partition}: {tp.error.str()} "
                         f"({tp.error.name()})")
        offsets[(tp.topic, tp.partition)] = tp.offset if tp.offset >= 0 else None
    return offsets


def high_watermarks(client: AdminClient, args: argparse.Namespace, partitions: list[tuple[str, int]],
                    spec: OffsetSpec | None = None) -> dict[tuple[str, int], int]:
    """ListOffsets for each partition: the high watermark, or what `spec` names (earliest, a time)."""
    if not partitions:
        return {}
    asked = {TopicPartition(t, p): spec or OffsetSpec.latest() for t, p in partitions}
    futures = client.list_offsets(asked, request_timeout=args.timeout)
    return {(tp.topic, tp.partition): int(wait_admin(f, args, {}, f"cannot list the offsets of {tp.topic}").offset)
            for tp, f in futures.items()}


def _known_high_watermarks(client: AdminClient, args: argparse.Namespace,
                           partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """High watermarks of the partitions that still exist: a group keeps its offsets of a deleted
    topic, shown without a high watermark or lag (as kafka-consumer-groups.sh shows them)."""
    topics = metadata(client, args).topics
    known = [(t, p) for t, p in partitions if t in topics and p in topics[t].partitions]
    return high_watermarks(client, args, known)


def _print_group(group: dict[str, Any]) -> None:
    print(f"Group {group['group_id']}: {group['state']}, protocol {group['protocol'] or '-'}, "
          f"coordinator {group['coordinator']}, total lag {group['lag']}")
    if group["members"]:
        rows = [[m["member_id"], m["client_id"], m["host"], _assignment(m["assignment"])] for m in group["members"]]
        print_table(None, ["MEMBER", "CLIENT ID", "HOST", "ASSIGNMENT"], rows)
    else:
        print("no active members")
    offset_rows = [[o["topic"], o["partition"], _or_dash(o["committed"]), _or_dash(o["high_watermark"]), _or_dash(o["lag"]),
                    o["member_id"] or "-"] for o in group["offsets"]]
    print_table(None, ["TOPIC", "PARTITION", "COMMITTED", "HIGH WATERMARK", "LAG", "MEMBER"], offset_rows)


def _or_dash(value: int | None) -> object:
    return "-" if value is None else value


def _assignment(assigned: list[dict[str, Any]]) -> str:
    by_topic: dict[str, list[str]] = {}
    for a in assigned:
        by_topic.setdefault(a["topic"], []).append(str(a["partition"]))
    return " ".join(f"{topic}:{','.join(parts)}" for topic, parts in by_topic.items())


# -- reset-offsets -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Planned:
    topic: str
    partition: int
    current: int | None
    new: int


def reset_offsets(args: argparse.Namespace) -> int:
    client = admin_client(args)
    _refuse_active(client, args)
    partitions = _partitions(client, args, args.topic)
    current = committed_offsets(client, args, args.group, partitions)
    targets = _targets(client, args, partitions)
    plan = [Planned(t, p, current.get((t, p)), targets[(t, p)]) for t, p in partitions]
    if args.execute:
        _commit(client, args, plan)
    _print_plan(args, plan)
    return OK


def _refuse_active(client: AdminClient, args: argparse.Namespace) -> None:
    """Refuses a group with members; a group that does not exist yet gets its first offsets."""
    try:
        description = describe_group(client, args, args.group)
    except KafkaFailed as failure:
        if failure.error_name == "GROUP_ID_NOT_FOUND":
            return
        raise
    if description.members:
        raise KafkaFailed(f"group {args.group} has {len(description.members)} active member(s) (state "
                          f"{_state(description.state)}): offsets can only be reset while it has none; stop its "
                          f"consumers first (NON_EMPTY_GROUP)", REFUSED, "NON_EMPTY_GROUP")


def topic_spec(text: str) -> tuple[str, list[int] | None]:
    """`T` (every partition) or `T:P,P,...` (argparse's type=)."""
    topic, _, parts = text.partition(":")
    if not topic:
        raise argparse.ArgumentTypeError(f"expected TOPIC or TOPIC:P,P,..., got {text!r}")
    if not parts:
        return topic, None
    try:
        return topic, [int(p) for p in parts.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"partitions must be numbers: {text!r}") from None


def _partitions(client: AdminClient, args: argparse.Namespace,
                specs: list[tuple[str, list[int] | None]]) -> list[tuple[str, int]]:
    cluster = metadata(client, args)
    chosen: list[tuple[str, int]] = []
    for topic, parts in specs:
        known = cluster.topics.get(topic)
        if known is None or known.error is not None:
            raise KafkaFailed(f"topic {topic} does not exist (UNKNOWN_TOPIC_OR_PART)", REFUSED, "UNKNOWN_TOPIC_OR_PART")
        missing = sorted(set(parts or []) - set(known.partitions))
        if missing:
            raise KafkaFailed(f"topic {topic} has no partition {missing[0]} (UNKNOWN_TOPIC_OR_PART)", REFUSED,
                              "UNKNOWN_TOPIC_OR_PART")
        chosen += [(topic, p) for p in (parts if parts is not None else sorted(known.partitions))]
    return sorted(set(chosen))


def _targets(client: AdminClient, args: argparse.Namespace, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    starts = high_watermarks(client, args, partitions, OffsetSpec.earliest())
    ends = high_watermarks(client, args, partitions)
    if args.to_earliest:
        return starts
    if args.to_latest:
        return ends
    if args.to_timestamp is not None:
        found = high_watermarks(client, args, partitions, OffsetSpec.for_timestamp(args.to_timestamp))
        return {tp: found[tp] if found[tp] >= 0 else ends[tp] for tp in partitions}
    return {tp: min(max(args.to_offset, starts[tp]), ends[tp]) for tp in partitions}


def _commit(client: AdminClient, args: argparse.Namespace, plan: list[Planned]) -> None:
    request = [ConsumerGroupTopicPartitions(args.group, [TopicPartition(p.topic, p.partition, p.new) for p in plan])]
    answer = call_admin(lambda: client.alter_consumer_group_offsets(request, request_timeout=args.timeout)[args.group],
                        args, _phrases(args.group), f"cannot commit the offsets of group {args.group}")
    for tp in answer.topic_partitions:
        if tp.error is not None:
            raise Failed(f"cannot commit the offset of group {args.group} on {tp.topic}:{tp.partition}: "
                         f"{tp.error.str()} ({tp.error.name()})")


def _print_plan(args: argparse.Namespace, plan: list[Planned]) -> None:
    if args.output == "json":
        print_json({"group_id": args.group, "executed": bool(args.execute),
                    "offsets": [{"topic": p.topic, "partition": p.partition, "current": p.current, "new": p.new}
                                for p in plan]})
        return
    rows = [[p.topic, p.partition, _or_dash(p.current), p.new] for p in plan]
    print_table(None, ["TOPIC", "PARTITION", "CURRENT", "NEW"], rows)
    if args.execute:
        print(f"reset the offsets of group {args.group}")
    else:
        print(f"dry run: the offsets of group {args.group} are unchanged; add --execute to reset them")


# -- delete ------------------------------------------------------------------------------------

def delete(args: argparse.Namespace) -> int:
    client = admin_client(args)
    outcomes = {group: _delete_one(client, args, group) for group in args.groups}
    deleted = [group for group, failure in outcomes.items() if failure is None]
    if args.output == "json":
        print_json({"deleted": deleted})
    else:
        for group in deleted:
            print(f"deleted group {group}")
    for failure in outcomes.values():
        if failure is not None:
            raise failure
    return OK


def _delete_one(client: AdminClient, args: argparse.Namespace, group: str) -> Failed | None:
    try:
        call_admin(lambda: client.delete_consumer_groups([group], request_timeout=args.timeout)[group], args,
                   _phrases(group), f"cannot delete group {group}")
    except Failed as failure:
        return failure
    return None


# -- command line ------------------------------------------------------------------------------

def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="martlet group", description=DESCRIPTION, epilog=EXAMPLES,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    subs = top.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    subcommand(subs, "list", list_groups, "list the consumer groups",
                "List the consumer groups with their state (and, where Martlet answers, members and total lag).")
    command = subcommand(subs, "describe", describe, "show members, assignment and lag of groups",
                          "Show a group's state and members (client id, host, assigned partitions) and, per "
                          "partition, the committed offset, the high watermark and the lag between them.")
    command.add_argument("groups", nargs="+", metavar="GROUP", help="group id(s)")
    _reset_parser(subs)
    command = subcommand(subs, "delete", delete, "delete groups and their committed offsets",
                          "Delete consumer groups and their committed offsets. A group with members cannot be "
                          "deleted (NON_EMPTY_GROUP).")
    command.add_argument("groups", nargs="+", metavar="GROUP", help="group id(s)")
    return top


def _reset_parser(subs: Any) -> None:
    command = subcommand(subs, "reset-offsets", reset_offsets, "move a group's committed offsets",
                          "Move a group's committed offsets, so its consumers restart from there. Without "
                          "--execute this is a dry run that only prints the plan. The group must have no "
                          "active members.")
    command.add_argument("group", metavar="GROUP", help="the group id")
    command.add_argument("--topic", "-t", action="append", type=topic_spec, required=True, metavar="TOPIC[:P,...]",
                         help="a topic, or some of its partitions as TOPIC:0,1 (repeatable)")
    to = command.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="to each partition's log start offset")
    to.add_argument("--to-latest", action="store_true", help="to each partition's high watermark (skip everything)")
    to.add_argument("--to-timestamp", "--to-datetime", type=timestamp_ms, metavar="TIME",
                    help="to the first record at or after TIME: milliseconds since the epoch, or ISO 8601 "
                         "(2026-12-04T10:00:00Z; without a zone, local time)")
    to.add_argument("--to-offset", type=int, metavar="N", help="to offset N (kept within each partition's range)")
    mode = command.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="only print the plan (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    if getattr(args, "to_offset", None) is not None and args.to_offset < 0:
        parser().error("--to-offset must be 0 or more")
    return run(args.func, args)

