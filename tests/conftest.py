"""Shared fixtures: a fake clock, sequential ids, and a ``memory`` that runs each test on every backend."""

from __future__ import annotations

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import kumiho_memory as km  # noqa: E402

SHARED = os.path.join(os.path.dirname(ROOT), "shared")


@pytest.fixture
def clock() -> km.ManualClock:
    """A clock at 2026-01-01T00:00:00Z that moves one second after every reading."""
    return km.ManualClock("2026-01-01T00:00:00Z", tick=1.0)


@pytest.fixture
def ids() -> km.SequentialIds:
    return km.SequentialIds()


# Every backend the contract suite runs on. The Redis and Kumiho backends join this list in their issues.
BACKENDS = ["sqlite-memory", "sqlite-file"]


@pytest.fixture(params=BACKENDS)
def backend_name(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def make_memory(backend_name, tmp_path, clock, ids):
    """A factory for ``Memory`` objects on the backend under test; all are closed at teardown.

    ``make_memory(reopen=True)`` opens the same store again (on the file backend a new connection to the
    same file; the in-memory backend cannot reopen and skips).
    """
    opened: list[km.Memory] = []
    path = str(tmp_path / "store.db")

    def factory(*, reopen: bool = False, **options) -> km.Memory:
        options.setdefault("clock", clock)
        options.setdefault("ids", ids)
        if backend_name == "sqlite-memory":
            if reopen:
                pytest.skip("an in-memory store cannot be reopened")
            memory = km.Memory(**options)
        else:
            memory = km.Memory(path, **options)
        opened.append(memory)
        return memory

    yield factory
    for memory in opened:
        memory.close()


@pytest.fixture
def memory(make_memory) -> km.Memory:
    """A fresh ``Memory`` on the backend under test."""
    return make_memory()
