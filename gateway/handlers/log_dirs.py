"""DescribeLogDirs (35): where this node's partitions are stored, and how many bytes each holds.

Each node answers for the partitions it has open. They all live in one place, the store, so
the answer has one log dir, named by the store's location (an HDFS URL or a directory), as
Kafka names a log dir by its path. A partition's size is the bytes its log segments hold
(the memory tail not yet persisted is not counted); there is no follower to lag and no
future log (AlterReplicaLogDirs is not served). The volume's total and usable bytes are not
known for a store, so they are -1, Kafka's "unknown".
"""

from __future__ import annotations

from collections import defaultdict

from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest
from kio.schema.errors import ErrorCode

from ...engine.api import TopicPartition
from ...protocol.answers import (
    DescribeLogDirsAnswer,
    DescribeLogDirsPartitionAnswer,
    DescribeLogDirsTopicAnswer,
)
from ...protocol.apis import ApiKey
from ...protocol.codec import RequestHeader
from ..context import Context
from .api import handles

UNKNOWN_BYTES = -1


@handles(ApiKey.DESCRIBE_LOG_DIRS, 1, 5)
async def describe_log_dirs(ctx: Context, header: RequestHeader, request: DescribeLogDirsRequest) -> DescribeLogDirsAnswer:
    sizes = ctx.partitions.sizes()
    if request.topics is not None:  # null asks for every partition; a list, for those named that are here
        named = {TopicPartition(t.topic, p) for t in request.topics for p in t.partitions}
        sizes = {tp: size for tp, size in sizes.items() if tp in named}
    return {"throttle_time": 0, "error_code": ErrorCode.none, "results": [
        {"error_code": ErrorCode.none, "log_dir": ctx.log_dir, "topics": _by_topic(sizes),
         "total_bytes": UNKNOWN_BYTES, "usable_bytes": UNKNOWN_BYTES, "is_cordoned": False}]}


def _by_topic(sizes: dict[TopicPartition, int]) -> list[DescribeLogDirsTopicAnswer]:
    topics: dict[str, list[DescribeLogDirsPartitionAnswer]] = defaultdict(list)
    for tp, size in sorted(sizes.items()):
        topics[tp.topic].append({"partition_index": tp.partition, "partition_size": size, "offset_lag": 0,
                                 "is_future_key": False})
    return [{"name": name, "partitions": partitions} for name, partitions in topics.items()]
