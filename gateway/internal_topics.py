"""`__consumer_offsets`, shown as Kafka shows it: Martlet's committed-offset shards.

Kafka keeps group state in the compacted internal topic `__consumer_offsets`. Martlet keeps
it in shard logs of its own (engine/groups/shards.py), one per partition Kafka would have
(the shard count is `offsets.topic.num.partitions`), whose records are Martlet's, not
Kafka's. Clients and tools see the topic where Kafka shows it:
- Metadata and DescribeTopicPartitions list it with is_internal set (so a pattern
  subscription skips it), one partition per shard, led by the node coordinating that
  shard's groups; its id is derived from the cluster id, so every node gives the same one;
- DescribeConfigs shows the configs the shards have (compacted, Kafka's segment size for
  them is Martlet's shard segment size); CreateTopics answers TOPIC_ALREADY_EXISTS (the
  engine never creates a topic under a reserved name).
What cannot be served is refused with a clear error rather than answered wrongly:
- Produce and DeleteRecords: INVALID_TOPIC_EXCEPTION, as Kafka refuses writes to it;
- Fetch, ListOffsets and OffsetForLeaderEpoch: TOPIC_AUTHORIZATION_FAILED, which clients
  report as "not authorized to access topics: [__consumer_offsets]": the records are not in
  Kafka's format (committed offsets are read with OffsetFetch, e.g. the admin API);
- DeleteTopics, CreatePartitions and config changes: INVALID_TOPIC_EXCEPTION. Kafka allows
  them; here they would drop every group or move groups away from their shard.
Kafka creates the topic on the first FindCoordinator for a group; Martlet lists it from the
start (its shards exist from the start). `__transaction_state` joins when transactions do.
"""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from ..engine.api import GROUP_SEGMENT_BYTES
from .context import Context

OFFSETS = "__consumer_offsets"
# The topic configs the shards have where they differ from a topic's defaults, as Kafka's
# DescribeConfigs shows them for its __consumer_offsets.
OFFSETS_CONFIGS = {"cleanup.policy": "compact", "compression.type": "producer",
                   "segment.bytes": str(GROUP_SEGMENT_BYTES)}
WRITE_REFUSED = ErrorCode.invalid_topic_exception
READ_REFUSED = ErrorCode.topic_authorization_failed
CHANGE_MESSAGE = (f"{OFFSETS} shows Martlet's committed-offset shards: it cannot be deleted, "
                  "grown or reconfigured")
_ID_NAMESPACE = uuid.UUID("6d617274-6c65-7420-8000-696e7465726e")  # fixed: ids must not change


def is_internal(name: str | None) -> bool:
    return name == OFFSETS


def offsets_topic_id(ctx: Context) -> uuid.UUID:
    """The same on every node and every start of one cluster."""
    return uuid.uuid5(_ID_NAMESPACE, f"{ctx.cluster_id}/{OFFSETS}")


def internal_by_id(ctx: Context, topic_id: uuid.UUID | None) -> str | None:
    """The internal topic's name when `topic_id` is its id."""
    return OFFSETS if topic_id is not None and topic_id == offsets_topic_id(ctx) else None
