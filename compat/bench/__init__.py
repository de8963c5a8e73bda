"""`martlet bench`: Martlet and Apache Kafka side by side under the same librdkafka load.

- `load.py` is the load generator, run as its own process (one per producer or consumer) so
  the client never shares a core's interpreter with the orchestrator.
- `probe.py` reads a broker's CPU seconds and resident memory from /proc.
- `workloads.py` defines what runs against one endpoint and what each run reports.
- `runner.py` starts the brokers, alternates them round by round and reports medians.
- `cluster.py` is `martlet bench --cluster`: Martlet clusters of 1 and 2 brokers on ZooKeeper
  and HDFS beside one Kafka broker, and failover times under kill -9 (`failover.py`: the
  steady producer, the timing and the exactly-once read-back).
- `udp.py` is `martlet bench --udp`: UDP datagrams a second one sender gets accepted and
  persisted by Martlet's datagram front end (gateway/udp.py).
- `secured.py` is `martlet bench --secured`: 1 KB produce and consume over SASL_SSL (SCRAM-SHA-512)
  on Martlet and on Kafka configured the same way, beside the plaintext listener of the same
  brokers: the ratio of the two secured endpoints and what SASL_SSL costs each system.
- `native.py` is `martlet bench --native`: the native SDK's AsyncProducer beside confluent-kafka
  acks=all on one Martlet: throughput, and acknowledgement latency at 1,000 records/s.
"""
