"""Raw CreateTopics and DescribeConfigs against Martlet and the reference Kafka at once (a Both pair)."""

from __future__ import annotations

from tests.fixtures.reference_pair import Both
from tests.integration.raw_client import serving

CREATE_TOPICS, DESCRIBE_CONFIGS = 19, 32


def create(both: Both, name: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
            "timeout": 30_000}
    for answer in both.ask(CREATE_TOPICS, 7, body):
        assert answer.topics[0].error_code == 0, answer

    both.each(lambda client: serving(client, {name: partitions}))
