"""Martlet's native SDK (martlet.client): Talos' programming model over Swift's write protocol.

Admin/AsyncAdmin: topics DDL. Producer/AsyncProducer: asynchronous writes routed by logical
partition, answered from the broker's memory with the checkpoint C, resent after a reload.
SimpleProducer: synchronous, one partition. Consumer/SimpleConsumer: see consumer.py.

Consumers (consumer.py, simple_consumer.py; reading in fetching.py): SimpleConsumer and
AsyncSimpleConsumer read one partition by offset, `fetch(offset, max_messages, timeout_s)`
waiting up to timeout_s for data, with `earliest()` and `latest()`; they keep no position.
Consumer and AsyncConsumer are members of a group (KIP-848: the broker assigns partitions,
heartbeats run in the background, a member revokes what it loses and commits first when
auto_commit); `poll(timeout_s)`, `commit()` (what poll returned so far), `assignment()`,
`close()` (commits when auto_commit, leaves the group). With `broadcast=True` every member
reads every partition and commits under a group of its own, f"{group}.{member_name}", so a
restarted member with the same member_name resumes. Reads are read_committed by default:
records of aborted transactions never reach the caller. Messages are message.Message. A
Consumer holds a partition added by an online split back until its parent is read up to the
split point (by itself, or by its group's commits), so each key stays in order; a
SimpleConsumer reads what it is told.

Every client takes `tls=` (an ssl.SSLContext, for a broker's SSL listener) and `sasl=`
(martlet.protocol.sasl_client.Login: PLAIN, SCRAM-SHA-256/512 or OAUTHBEARER, for a SASL one);
the producer's are ProducerConfig fields, the group consumer's options.
"""
