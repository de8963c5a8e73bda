"""InitProducerId without a transactional id: every request gets a fresh id at epoch 0
(with one: test_transactions.py).

Apache Kafka (4.4.0, checked with a raw request) ignores producer_id/producer_epoch when
transactional_id is null and "blindly" hands out a new id; only transactional producers get
the KIP-360 epoch bump of the same id."""

from .harness import INIT_PRODUCER_ID, Broker


def init(broker: Broker, version: int = 4, **fields: object) -> tuple[int, int, int]:
    body = {"transactional_id": None, "transaction_timeout": 60_000, "producer_id": -1, "producer_epoch": -1} | fields
    answer = broker.call(INIT_PRODUCER_ID, version, body)
    return answer.error_code, answer.producer_id, answer.producer_epoch


def test_new_producers_get_distinct_ids_at_epoch_zero(broker: Broker) -> None:
    answers = [init(broker), init(broker), init(broker, version=0)]
    assert all(code == 0 and epoch == 0 for code, _, epoch in answers)
    ids = [producer_id for _, producer_id, _ in answers]
    assert len(set(ids)) == 3 and min(ids) >= 0


def test_named_id_and_epoch_get_a_fresh_id_without_a_transactional_id(broker: Broker) -> None:
    _, producer_id, _ = init(broker)
    code, renewed, epoch = init(broker, producer_id=producer_id, producer_epoch=0)
    assert (code, epoch) == (0, 0)
    assert renewed >= 0 and renewed != producer_id
