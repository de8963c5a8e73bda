"""The operator's commands: `martlet topic|group|produce|consume|status|completion`. They are
Kafka clients (confluent-kafka, that is librdkafka, as kcat is), so they work against any Kafka
endpoint; what only Martlet has (logical slot ranges, C, unpersisted bytes, memory) they read
from the broker's HTTP port when it answers."""
