from collections.abc import Iterator

import pytest

from .handlers.harness import Broker


@pytest.fixture
def broker() -> Iterator[Broker]:
    instance = Broker()
    try:
        yield instance
    finally:
        instance.close()
