"""Transactions (KIP-98): the coordinator's state machine (coordinator.py) and its values (types.py)."""
