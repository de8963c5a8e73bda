"""Martlet's native SDK (martlet.client): Talos' programming model over Swift's write protocol.

Admin/AsyncAdmin: topics DDL. Producer/AsyncProducer: asynchronous writes routed by logical
partition, answered from the broker's memory with the checkpoint C, resent after a reload.
SimpleProducer: synchronous, one partition. Consumer/SimpleConsumer: see consumer.py.
"""
