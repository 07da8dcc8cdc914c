"""The OpenAI Agents SDK session kept in kumiho working memory, with the real ``openai-agents`` package.

Its behaviour is checked against the SDK's own reference session (``SQLiteSession``, in memory): the same
operations must give the same results. Skipped (visibly) when the SDK is missing, except under CI.
"""

from __future__ import annotations

import asyncio
import os

import pytest

import kumiho_memory as km

try:
    from agents import Agent, Runner, SQLiteSession
    from agents.memory.session import SessionABC
except ImportError:  # the optional extra is not installed
    SessionABC = None

pytestmark = pytest.mark.skipif(
    SessionABC is None and not os.environ.get("CI"),
    reason="openai-agents is not installed (pip install openai-agents, or pip install -e '.[agents]'); CI runs these")

ITEMS = [
    {"role": "user", "content": "Hi, I'm Ann. I moved to Lisbon last month."},
    {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
     "content": [{"type": "output_text", "text": "Welcome to Lisbon, Ann!", "annotations": []}]},
    {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": "{\"city\": \"Lisbon\"}",
     "id": "fc_1", "status": "completed"},
    {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 24 C"},
    {"role": "user", "content": [{"type": "input_text", "text": "What should I wear?"}]},
]


def run(coroutine):
    return asyncio.run(coroutine)


@pytest.fixture
def memory(tmp_path):
    with km.Memory(str(tmp_path / "agents.db")) as opened:
        yield opened


async def _script(session):
    """One sequence of session operations; returns everything observed."""
    seen = [await session.get_items(), await session.pop_item()]
    await session.add_items(ITEMS[:3])
    seen.append(await session.get_items())
    seen.append(await session.get_items(limit=2))
    seen.append(await session.get_items(limit=0))
    seen.append(await session.get_items(limit=10))
    await session.add_items([])
    await session.add_items(ITEMS[3:])
    seen.append(await session.pop_item())
    seen.append(await session.get_items())
    seen.append(await session.get_items(limit=1))
    await session.clear_session()
    seen.append(await session.get_items())
    seen.append(await session.pop_item())
    await session.add_items(ITEMS[:1])
    seen.append(await session.get_items())
    return seen


def test_it_is_an_sdk_session(memory):
    session = km.agents_session("chat-1", memory)
    assert isinstance(session, SessionABC) and session.session_id == "chat-1"
    run(session.aclose())


def test_it_behaves_like_the_sdks_own_sqlite_session(memory):
    reference = SQLiteSession("chat-1")
    ours = km.agents_session("chat-1", memory)
    try:
        assert run(_script(ours)) == run(_script(reference))
    finally:
        reference.close()
        run(ours.aclose())


def test_sessions_are_separate_and_a_reopen_keeps_the_items(tmp_path):
    path = str(tmp_path / "agents.db")
    with km.Memory(path) as memory:
        first, second = km.agents_session("a", memory), km.agents_session("b", memory)
        run(first.add_items(ITEMS[:2]))
        run(second.add_items(ITEMS[2:3]))
        run(first.aclose())
        run(second.aclose())
    with km.Memory(path) as memory:
        again = km.agents_session("a", memory)
        assert run(again.get_items()) == ITEMS[:2]
        assert run(km.agents_session("b", memory).get_items()) == ITEMS[2:3]
        run(again.aclose())


def test_credentials_are_cut_out_before_they_are_kept(memory):
    session = km.agents_session("chat-secret", memory)
    key = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6"
    run(session.add_items([{"role": "user", "content": f"my key is {key}"}]))
    [kept] = run(session.get_items())
    assert key not in kept["content"] and kept["role"] == "user"
    run(session.aclose())


def test_the_session_consolidates_like_any_working_memory_session(memory):
    session = km.agents_session("chat-ann", memory, user_id="ann", context="personal")
    run(session.add_items(ITEMS))
    # through the manager, over the same store file's buffer
    manager = km.UniversalMemoryManager(memory=memory)
    try:
        done = run(manager.consolidate_session(session_id="chat-ann"))
    finally:
        run(manager.close())
    assert done["success"], done
    stored = memory.get(done["store_result"]["revision_kref"])
    assert stored["metadata"]["session_id"] == "chat-ann" and stored["space"] == "personal/ann"
    assert "Lisbon" in stored["content"]
    assert run(session.get_items()) == []                   # consolidated messages left the buffer
    assert memory.recall("where did Ann move?")[0]["kref"] == stored["kref"]
    # and through the session's own shortcut, on an in-memory store (its own in-memory buffer)
    with km.Memory() as scratch:
        other = km.agents_session("chat-2", scratch)
        run(other.add_items(ITEMS[:2]))
        result = run(other.consolidate(space_path="chats"))
        assert result["success"] and scratch.get(result["store_result"]["revision_kref"])["space"] == "chats"
        run(other.aclose())
    run(session.aclose())


def test_a_bad_session_id_or_item_is_refused(memory):
    with pytest.raises(km.InvalidArgumentError):
        km.agents_session("has spaces", memory)
    session = km.agents_session("chat-x", memory)
    with pytest.raises(km.InvalidArgumentError):
        run(session.add_items([{"role": "user", "content": object()}]))
    run(session.aclose())


def test_a_runner_turn_goes_through_the_session(memory):
    """The SDK's Runner reads the history from the session and appends the turn to it (a canned model)."""
    from agents import RunConfig
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseOutputMessage, ResponseOutputText

    seen_inputs = []

    class CannedModel(Model):
        async def get_response(self, system_instructions, input, *args, **kwargs):
            seen_inputs.append(input)
            text = ResponseOutputText(type="output_text", text=f"reply {len(seen_inputs)}", annotations=[])
            message = ResponseOutputMessage(id=f"msg_{len(seen_inputs)}", type="message", role="assistant",
                                            status="completed", content=[text])
            return ModelResponse(output=[message], usage=Usage(), response_id=None)

        def stream_response(self, *args, **kwargs):
            raise NotImplementedError

    agent = Agent(name="helper", instructions="Be brief.", model=CannedModel())
    session = km.agents_session("runner-1", memory)
    offline = RunConfig(tracing_disabled=True)
    first = Runner.run_sync(agent, "Remember: my cat is Miso.", session=session, run_config=offline)
    second = Runner.run_sync(agent, "What is my cat called?", session=session, run_config=offline)
    assert first.final_output == "reply 1" and second.final_output == "reply 2"
    history = run(session.get_items())
    assert [item.get("role") for item in history] == ["user", "assistant", "user", "assistant"]
    assert "Miso" in str(seen_inputs[1])                 # the second turn saw the first through the session
    run(session.aclose())


def test_the_default_memory_is_used_when_none_is_given(tmp_path, monkeypatch):
    import subprocess
    import sys
    code = ("import asyncio, kumiho_memory as km; s = km.agents_session('d-1'); "
            "asyncio.run(s.add_items([{'role': 'user', 'content': 'hello'}])); import json; "
            "print(json.dumps(asyncio.run(s.get_items())))")
    environment = {**os.environ, "KUMIHO_MEMORY_PATH": str(tmp_path / "default.db")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment, timeout=120)
    assert done.returncode == 0, done.stderr
    import json
    assert json.loads(done.stdout) == [{"role": "user", "content": "hello"}]
