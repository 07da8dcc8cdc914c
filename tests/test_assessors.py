"""Write-time assessors (issue 5 item 5): prefilter, duplicate check, grading, and the manager running them.

The LLM is an external service; these tests give the assessors a small in-test adapter that answers like
one (the HTTP adapters themselves are tested against loopback servers in test_llm_adapters.py).
"""

from __future__ import annotations

import asyncio
import json

import pytest

import kumiho_memory as km


class ScriptedLLM:
    """Answers every chat with the next scripted reply and records the prompts."""

    def __init__(self, *replies: object) -> None:
        self.replies = list(replies)
        self.prompts: list[str] = []

    async def chat(self, *, messages, model="", system="", max_tokens=1024, json_mode=False):
        self.prompts.append(messages[-1]["content"])
        reply = self.replies.pop(0) if self.replies else {"should_store": False}
        if isinstance(reply, Exception):
            raise reply
        return reply if isinstance(reply, str) else json.dumps(reply)


def turns(*texts: str) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": text} for i, text in enumerate(texts)]


@pytest.mark.parametrize("window, expected", [
    (turns("I always prefer tea over coffee in the morning, please remember it."), True),
    (turns("We decided to ship on Friday because QA is done by then.", "Great."), False),   # ends in an ack
    (turns("We decided to ship on Friday because QA is done by then.", "Okay, noted the Friday ship date."), True),
    (turns("hi", "hello"), False),                                                              # too short
    (turns("Can you explain how the scheduler works in this codebase, step by step?"), False),  # no signal
    (turns("I prefer this version of the function a lot more than the old one", "```python\nprint(1)\n```"), False),
])
def test_heuristic_prefilter(window, expected):
    assert km.heuristic_prefilter(window) is expected


def recalled_memory(kref, content, *, source=None, tags=(), level=None):
    metadata = {}
    if source:
        metadata["source"] = source
    if level:
        metadata["evidence_level"] = level
    return {"kref": kref, "content": content, "metadata": metadata, "tags": list(tags)}


def test_grade_evidence_corroborates_with_distinct_canonical_sources():
    recalled = [recalled_memory("k1", "Acme earned 5M", source="Wikipedia"),
                recalled_memory("k2", "Acme earned 5M", source="https://en.wikipedia.org/wiki/Acme"),
                recalled_memory("k3", "Acme earned 5M", source="reuters.com")]
    one_source = km.grade_evidence(recalled, [1, 2], [])
    assert one_source["evidence_level"] is None and one_source["has_agreement"]     # wikipedia counts once
    two = km.grade_evidence(recalled, [1, 3], [])
    assert two["evidence_level"] == km.CORROBORATED and two["memory_type"] == "fact"
    assert two["supporting_krefs"] == ["k1", "k3"] and not two["pinned"]
    conflicted = km.grade_evidence(recalled, [1, 3], [2])
    assert conflicted["evidence_level"] is None and conflicted["conflicting_krefs"] == ["k2"]
    assert km.grade_evidence(recalled, [1, 3, 99, 0, "x"], [])["supporting_krefs"] == ["k1", "k3"]


def test_grade_evidence_pins_claims_against_official_memories():
    recalled = [recalled_memory("k1", "Revenue was 5M", tags=["evidence:official"]),
                recalled_memory("k2", "Revenue was 5M", level=km.OFFICIAL),
                recalled_memory("k3", "Revenue was 7M", source="blog")]
    for official in (1, 2):
        grade = km.grade_evidence(recalled, [3], [official])
        assert grade == {"evidence_level": km.UNVERIFIED, "memory_type": None, "supporting_krefs": [],
                         "conflicting_krefs": [f"k{official}"], "pinned": True, "has_agreement": True}
    policy = km.EvidencePolicy(official_tags=frozenset({"evidence:official", "published"}))
    published = [recalled_memory("k9", "x", tags=["published"])]
    assert km.grade_evidence(published, [], [1], policy)["pinned"]
    assert not km.grade_evidence(published, [], [1])["pinned"]


def test_llm_assessor_skips_near_duplicates_before_calling_the_llm():
    llm = ScriptedLLM({"should_store": True, "content": "Ann prefers tea.", "memory_type": "preference"})
    assess = km.create_llm_assessor(llm)
    window = turns("I always prefer tea over coffee in the morning, remember that.")
    duplicate = asyncio.run(assess(window, [recalled_memory("k", "I always prefer tea over coffee in the morning, "
                                                                 "remember that.")]))
    assert not duplicate.should_store and "duplicate" in duplicate.reason and llm.prompts == []
    stored = asyncio.run(assess(window, [recalled_memory("k", "Bob owns a bicycle.")]))
    assert stored.should_store and stored.content == "Ann prefers tea." and stored.memory_type == "preference"
    assert "prefer tea" in llm.prompts[0] and "Bob owns a bicycle" in llm.prompts[0]
    assert not asyncio.run(assess(turns("hi", "hello"), [])).should_store and len(llm.prompts) == 1


def test_evidence_assessor_grades_and_never_emits_official():
    recalled = [recalled_memory("k1", "Acme posted record earnings", source="reuters"),
                recalled_memory("k2", "Acme posted record earnings", source="bloomberg.com")]
    window = turns("Remember: Acme posted record earnings, I read it in the FT today.")
    reply = {"should_store": True, "content": "Acme posted record earnings.", "agrees_with": [1, 2],
             "contradicts": [], "source": "ft.com", "memory_type": "news"}
    result = asyncio.run(km.create_evidence_assessor(ScriptedLLM(reply), policy=km.EvidencePolicy(
        create_supports_edges=True))(window, recalled))
    assert result.evidence_level == km.CORROBORATED and result.memory_type == "fact"
    assert result.supporting_krefs == ["k1", "k2"] and result.source == "ft.com"
    lone = asyncio.run(km.create_evidence_assessor(ScriptedLLM({**reply, "agrees_with": [],
                                                                "evidence_level": "official"}))(
        window, recalled))
    assert lone.evidence_level == km.SINGLE_SOURCE
    sourceless = asyncio.run(km.create_evidence_assessor(ScriptedLLM({**reply, "agrees_with": [], "source": ""}))(
        window, recalled))
    assert sourceless.evidence_level == km.UNVERIFIED


def _conversation(manager, user="ann"):
    async def run():
        first = await manager.ingest_message(user_id=user, message="I always prefer tea over coffee in the morning, "
                                                                   "remember that please.")
        sid = first["session_id"]
        await manager.add_assistant_response(session_id=sid, response="Got it: tea in the mornings from now on.")
        await manager.ingest_message(user_id=user, message="Great, and I decided to start work at 9 every day.",
                                     session_id=sid)
        await manager.add_assistant_response(session_id=sid, response="Noted: you start at 9 and you prefer tea.")
        await manager.close()
        return sid
    return asyncio.run(run())


def test_manager_runs_the_assessor_after_responses_and_stores_with_provenance():
    memory = km.Memory()
    existing = memory.remember("Ann's tea is green tea from the market", source="ann")
    official = memory.remember("Office hours start at 10", evidence_level="official")
    reply = {"should_store": True, "content": "Ann prefers tea over coffee; email ann@example.com.",
             "memory_type": "preference", "reason": "stated", "agrees_with": [], "contradicts": [1, 2],
             "source": "ann"}
    llm = ScriptedLLM(reply)
    manager = km.UniversalMemoryManager(memory=memory, auto_assess_fn=km.create_evidence_assessor(llm))
    _conversation(manager)
    assert manager.last_assess_error is None and len(llm.prompts) == 1     # 3 new messages needed: once
    stored = [hit for hit in memory.recall("prefers tea coffee", limit=10) if "auto-memorized" in hit["tags"]]
    assert len(stored) == 1
    memory_dict = stored[0]
    assert memory_dict["space"] == "personal/ann" and "[email]" in memory_dict["content"]
    assert memory_dict["metadata"]["auto_memorized"] == "true" and memory_dict["metadata"]["user_id"] == "ann"
    assert memory_dict["metadata"]["evidence_level"] != km.OFFICIAL
    contradicted = {edge["target_kref"] for edge in memory.edges(memory_dict["kref"], edge_type="CONTRADICTS")}
    assert contradicted and contradicted <= {existing, official}
    memory.close()


def test_a_failing_assessor_never_breaks_the_conversation():
    memory = km.Memory()
    manager = km.UniversalMemoryManager(memory=memory, auto_assess_fn=km.create_llm_assessor(
        ScriptedLLM(RuntimeError("LLM down"))))
    _conversation(manager)
    assert "LLM down" in manager.last_assess_error
    assert memory.stats()["items"] == 0
    memory.close()
