"""Kafka 4's exception handler config names (KIP-1056) beside the deprecated ``default.*``
forms: each form alone sets the handler; both with different values is an error naming both."""

from __future__ import annotations

from typing import Any

import pytest

from streamstate.app.config import StreamsConfig

_BASE = {"application.id": "names", "bootstrap.servers": "127.0.0.1:9092"}


def _handler(record: Any) -> str:
    return "continue"


@pytest.mark.parametrize(
    "form", ["production.exception.handler", "default.production.exception.handler"]
)
def test_either_form_sets_the_production_handler(form: str) -> None:
    config = StreamsConfig.from_mapping({**_BASE, form: "continue"})
    assert config.default_production_exception_handler == "continue"


@pytest.mark.parametrize(
    "form", ["deserialization.exception.handler", "default.deserialization.exception.handler"]
)
def test_either_form_sets_the_deserialization_handler(form: str) -> None:
    config = StreamsConfig.from_mapping({**_BASE, form: "continue"})
    assert config.default_deserialization_exception_handler == "continue"


def test_the_processing_handler_has_its_kafka_name() -> None:
    config = StreamsConfig.from_mapping({**_BASE, "processing.exception.handler": "continue"})
    assert config.processing_exception_handler == "continue"


@pytest.mark.parametrize(
    "name", ["production.exception.handler", "deserialization.exception.handler"]
)
def test_both_forms_agreeing_are_accepted(name: str) -> None:
    StreamsConfig.from_mapping({**_BASE, name: _handler, f"default.{name}": _handler})


@pytest.mark.parametrize(
    "name", ["production.exception.handler", "deserialization.exception.handler"]
)
def test_both_forms_disagreeing_name_both(name: str) -> None:
    with pytest.raises(ValueError, match=rf"'{name}'.*'default\.{name}'"):
        StreamsConfig.from_mapping({**_BASE, name: "continue", f"default.{name}": "fail"})
