"""`__consumer_offsets` and `__transaction_state`, shown as Kafka shows them: Martlet's
coordinator shards.

Kafka keeps group state in the compacted internal topic `__consumer_offsets` and transaction
state in `__transaction_state`. Martlet keeps both in shard logs of its own
(engine/coordinator/), one per partition Kafka would have (the shard count is
`offsets.topic.num.partitions`; a transactional id lives in the shard its id hashes to, as
Kafka's `transaction.state.log` partition does with the same count), whose records are
Martlet's, not Kafka's. Clients and tools see the topics where Kafka shows them:
- Metadata and DescribeTopicPartitions list them with is_internal set (so a pattern
  subscription skips them), one partition per shard, led by the node coordinating that
  shard's groups and transactional ids; each id is derived from the cluster id and the
  name, so every node gives the same one;
- DescribeConfigs shows the configs Kafka gives them (compacted; Kafka's segment size for
  them is Martlet's shard segment size); CreateTopics answers TOPIC_ALREADY_EXISTS (the
  engine never creates a topic under a reserved name).
What cannot be served is refused with a clear error rather than answered wrongly:
- Produce and DeleteRecords: INVALID_TOPIC_EXCEPTION, as Kafka refuses writes to them;
- Fetch, ListOffsets and OffsetForLeaderEpoch: TOPIC_AUTHORIZATION_FAILED, which clients
  report as "not authorized to access topics: [...]": the records are not in Kafka's
  format (committed offsets are read with OffsetFetch, transactions with
  DescribeTransactions);
- DeleteTopics, CreatePartitions and config changes: INVALID_TOPIC_EXCEPTION. Kafka allows
  them; here they would drop every group or transaction, or move them away from their shard.
Kafka creates each topic on the first FindCoordinator for a group or a transactional id;
Martlet lists them from the start (its shards exist from the start).
"""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from ..engine.api import GROUP_SEGMENT_BYTES
from .context import Context

OFFSETS = "__consumer_offsets"
TRANSACTIONS = "__transaction_state"
# The topic configs each has where they differ from a topic's defaults, as Kafka's
# DescribeConfigs shows them.
INTERNAL_CONFIGS: dict[str, dict[str, str]] = {
    OFFSETS: {"cleanup.policy": "compact", "compression.type": "producer", "segment.bytes": str(GROUP_SEGMENT_BYTES)},
    TRANSACTIONS: {"cleanup.policy": "compact", "compression.type": "uncompressed",
                   "segment.bytes": str(GROUP_SEGMENT_BYTES), "unclean.leader.election.enable": "false"},
}
WRITE_REFUSED = ErrorCode.invalid_topic_exception
READ_REFUSED = ErrorCode.topic_authorization_failed
_ID_NAMESPACE = uuid.UUID("6d617274-6c65-7420-8000-696e7465726e")  # fixed: ids must not change


def is_internal(name: str | None) -> bool:
    return name in INTERNAL_CONFIGS


def change_message(name: str) -> str:
    return f"{name} shows Martlet's coordinator shards: it cannot be deleted, grown or reconfigured"


def internal_topic_id(ctx: Context, name: str) -> uuid.UUID:
    """The same on every node and every start of one cluster."""
    return uuid.uuid5(_ID_NAMESPACE, f"{ctx.cluster_id}/{name}")


def internal_by_id(ctx: Context, topic_id: uuid.UUID | None) -> str | None:
    """The internal topic's name when `topic_id` is its id."""
    if topic_id is None:
        return None
    return next((name for name in INTERNAL_CONFIGS if topic_id == internal_topic_id(ctx, name)), None)
