"""Shared fixtures: one embedded broker per session and topic names unique to each test."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator

import pytest
from hypothesis import Phase, settings

from stream_ctx.shell.kafka.admin import ClientKwargs
from stream_ctx.shell.kafka.embedded import EmbeddedBroker

# `mutmut run` (docs/development/mutation.md) selects this: a mutant's first failing example
# kills it, so no time goes on shrinking, and no example saved for one mutant decides another's
# verdict.
settings.register_profile("mutation", database=None, phases=[Phase.explicit, Phase.generate])

# Characters Kafka forbids in topic names, as they appear in parametrized test ids.
_NOT_IN_TOPIC_NAMES = re.compile(r"[^a-zA-Z0-9._-]+")


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    """One broker for the session: Tansu starts in milliseconds but takes ~2 s to stop."""
    running = EmbeddedBroker.start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def client_kwargs(broker: EmbeddedBroker) -> ClientKwargs:
    """aiokafka connection settings for the session broker."""
    return {"bootstrap_servers": broker.bootstrap_servers}


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Factory of topic names owned by this test: `unique_topic("input")`."""
    test_name = _NOT_IN_TOPIC_NAMES.sub("-", request.node.name)[:100]

    def make(role: str) -> str:
        return f"{test_name}.{role}.{uuid.uuid4().hex[:8]}"

    return make


@pytest.fixture
def topic_name(unique_topic: Callable[[str], str]) -> str:
    """A single topic name owned by this test."""
    return unique_topic("topic")
