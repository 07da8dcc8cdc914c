"""Issue 16, item 5: an LLM as judge of the beliefs the rules cannot decide, against a loopback server speaking
OpenAI's chat-completions wire format. On any failure the rule decision stands and nothing is lost."""

from __future__ import annotations

import asyncio
import json

import pytest

import kumiho_memory as km
from test_llm_adapters import API_KEY, OpenAIServer, openai_adapter

SPACE = "facts"
OLD = "Zed Quinn commutes 40 minutes by train"
NEW = "Zed Quinn cycles to the office now"          # same subject; no relation or value kind decides


def item_of(kref: str) -> str:
    return str(km.Kref.parse(kref).item_kref())


@pytest.fixture
def server():
    running = OpenAIServer(api_key=API_KEY).start()
    yield running
    running.stop()


def judged_memory(server: OpenAIServer, **options) -> km.Memory:
    adapter = openai_adapter(server, retries=0, timeout=5.0)
    return km.Memory(None, llm=km.BeliefJudge(adapter, **options) if options else adapter)


def verdict(same: bool, reason: str = "both say how Zed gets to work") -> str:
    return json.dumps({"same_belief": same, "reason": reason})


def test_the_pair_is_one_the_rules_leave_open():
    matcher = km.RelationMatcher(lambda word: [])
    assert matcher.corrected(NEW, [OLD]) is None
    assert matcher.undecided(NEW, [OLD]) == [0]
    # rejected by a rule: another subject, two named relations, a many-valued predicate
    assert matcher.undecided("Ann Quinn cycles to the office now", [OLD]) == []
    assert matcher.undecided("Zed Quinn's favorite color is red", ["Zed Quinn's favorite food is pasta"]) == []
    assert matcher.undecided("Zed Quinn plays tennis", ["Zed Quinn plays the piano"]) == []


def test_without_a_judge_the_rules_keep_them_apart():
    memory = km.Memory(None)
    one, two = (memory.remember(text, space=SPACE, stack=True) for text in (OLD, NEW))
    assert item_of(one) != item_of(two)
    assert "belief_judge" not in memory.get(two)["metadata"]


def test_a_judge_that_says_yes_revises_the_belief_and_the_revision_says_so(server):
    memory = judged_memory(server)
    one = memory.remember(OLD, space=SPACE, stack=True)
    server.replies.append(verdict(True))
    two = memory.remember(NEW, space=SPACE, stack=True)
    assert item_of(two) == item_of(one) and two.endswith("?r=2")
    assert memory.get(two)["metadata"]["belief_judge"] == {
        "same_belief": True, "reason": "both say how Zed gets to work", "compared_with": one}
    assert memory.recall("How does Zed Quinn get to the office?", space=SPACE)[0]["content"] == NEW
    body = server.bodies()[-1]
    assert body["messages"][0]["role"] == "system" and "same_belief" in body["messages"][0]["content"]
    assert json.loads(body["messages"][1]["content"]) == {"stored": OLD, "new": NEW}
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"]["required"] == ["same_belief", "reason"]


def test_a_judge_that_says_no_keeps_a_new_belief_and_says_why(server):
    memory = judged_memory(server)
    one = memory.remember(OLD, space=SPACE, stack=True)
    server.replies.append(verdict(False, "a commute and a habit are two facts"))
    two = memory.remember(NEW, space=SPACE, stack=True)
    assert item_of(two) != item_of(one)
    assert memory.get(two)["metadata"]["belief_judge"]["same_belief"] is False
    assert memory.get(item_of(one))["content"] == OLD


@pytest.mark.parametrize("script", [
    ("reply", "Sure! They are the same belief."),                         # prose, no JSON
    ("reply", '{"same_belief": "yes", "reason": "same"}'),                  # not a boolean
    ("reply", '{"same_belief": true}'),                                     # a key missing
    ("reply", '{"same_belief": true, "reason": "x", "confidence": 0.9}'),   # another shape
    ("reply", '[true, "same"]'),                                            # an array
    ("garbage", None),                                                      # an HTML error page with 200
    ("status", 500), ("status", 400), ("drop", None),
], ids=["prose", "not-bool", "missing-key", "extra-key", "array", "html", "http-500", "http-400", "dropped"])
def test_a_failing_judge_keeps_the_rule_decision_and_loses_nothing(server, script):
    memory = judged_memory(server)
    one = memory.remember(OLD, space=SPACE, stack=True)
    action, value = script
    if action == "reply":
        server.replies.append(value)
    elif action == "status":
        server.script("status", code=value)
    else:
        server.script(action)
    two = memory.remember(NEW, space=SPACE, stack=True)
    assert len(server.requests) == 1                          # asked once (no retries), then the rules decided
    assert item_of(two) != item_of(one)                       # the rules' decision: a new belief
    assert memory.get(two)["content"] == NEW and memory.get(item_of(one))["content"] == OLD
    assert "belief_judge" not in memory.get(two)["metadata"]
    assert isinstance(memory.last_judge_error, km.ServiceError)


def test_a_judge_that_times_out_keeps_the_rule_decision(server):
    memory = judged_memory(server, timeout=0.3)
    one = memory.remember(OLD, space=SPACE, stack=True)
    server.script("hang", seconds=30)
    two = memory.remember(NEW, space=SPACE, stack=True)
    assert item_of(two) != item_of(one)
    assert memory.last_judge_error is not None and memory.last_judge_error.transient
    assert "did not answer" in str(memory.last_judge_error)


def test_the_judge_is_not_asked_what_the_rules_decide(server):
    memory = judged_memory(server)
    first = memory.remember("Zed Quinn lives in Paris", space=SPACE, stack=True)
    assert item_of(memory.remember("Zed Quinn lives in Rome", space=SPACE, stack=True)) == item_of(first)
    memory.remember("Ann Quinn cycles to the office now", space=SPACE, stack=True)      # another subject
    memory.remember("Zed Quinn's favorite color is red", space=SPACE, stack=True)
    memory.remember("Zed Quinn's favorite food is pasta", space=SPACE, stack=True)      # two named relations
    memory.remember("The value of a_val is 1", space=SPACE, stack=True)
    memory.remember("The value of b_val is 2", space=SPACE, stack=True)                 # another identifier
    assert server.requests == []


def test_the_prompt_is_bounded(server):
    memory = judged_memory(server, max_chars=200)
    memory.remember(OLD + ", " + "and the train is slow " * 300, space=SPACE, stack=True)
    server.replies.append(verdict(False))
    memory.remember(NEW + ", " + "through the park " * 400, space=SPACE, stack=True)
    assert server.requests, "the judge was not asked"
    question = json.loads(server.bodies()[-1]["messages"][1]["content"])
    assert len(question["stored"]) <= 200 and len(question["new"]) <= 200
    assert question["new"].startswith(NEW)


@pytest.mark.parametrize("candidates, asked", [(1, 1), (2, 2)])
def test_a_judge_asks_about_at_most_its_candidates(server, candidates, asked):
    memory = judged_memory(server, candidates=candidates)
    server.replies.append(verdict(False))
    memory.remember("Zed Quinn collects stamps from Peru", space=SPACE, stack=True)
    memory.remember(OLD, space=SPACE, stack=True)               # asks about the stamps: no
    before = len(server.requests)
    server.replies.extend([verdict(False), verdict(False)])
    memory.remember(NEW, space=SPACE, stack=True)               # two open candidates
    assert len(server.requests) - before == asked


def test_the_judge_works_inside_a_running_event_loop(server):
    memory = judged_memory(server)
    one = memory.remember(OLD, space=SPACE, stack=True)
    server.replies.append(verdict(True))

    async def agent() -> str:
        return memory.remember(NEW, space=SPACE, stack=True)
    assert item_of(asyncio.run(agent())) == item_of(one)


def test_the_answer_is_validated():
    assert km.BeliefJudge.parse('```json\n{"same_belief": false, "reason": "no"}\n```') == {
        "same_belief": False, "reason": "no"}
    assert len(km.BeliefJudge.parse(json.dumps({"same_belief": True, "reason": "r" * 5000}))["reason"]) <= \
        km.JUDGE_REASON_CHARS
    for reply in ("", "no", '{"same_belief": 1, "reason": "x"}', '{"reason": "x"}', None):
        with pytest.raises(km.ServiceError):
            km.BeliefJudge.parse(reply)


def test_a_judge_needs_a_chat_adapter_and_sane_limits():
    with pytest.raises(km.InvalidArgumentError):
        km.Memory(None, llm=object())
    adapter = km.OpenAICompatAdapter("http://127.0.0.1:9/v1", model="m")
    for options in ({"timeout": 0}, {"timeout": True}, {"max_chars": 0}, {"candidates": -1}):
        with pytest.raises(km.InvalidArgumentError):
            km.BeliefJudge(adapter, **options)
    assert isinstance(km.Memory(None, llm=adapter).belief_judge, km.BeliefJudge)


def test_a_subjectless_statement_asks_about_a_close_belief(server):
    memory = judged_memory(server)
    one = memory.remember("The staging database runs on port 5432", space=SPACE, stack=True)
    server.replies.append(verdict(True, "the staging database's port changed"))
    two = memory.remember("The staging database now listens on 6543", space=SPACE, stack=True)
    assert len(server.requests) == 1 and item_of(two) == item_of(one)
    assert memory.get(two)["metadata"]["belief_judge"]["compared_with"] == one


# -- wiring: the manager's adapter, and revise(<item kref>) (issue 16, items 2 and 5) ---------------------------

SUBJECTLESS_OLD = "deploys happen every friday afternoon"
SUBJECTLESS_NEW = "releases now go out on tuesday mornings"      # neither names a subject: the rules cannot tell


def test_the_manager_builds_its_memory_with_its_adapter_as_judge(server):
    adapter = openai_adapter(server, retries=0, timeout=5.0)
    manager = km.UniversalMemoryManager(memory_retrieve=lambda **_: {}, llm_adapter=adapter)
    try:
        assert isinstance(manager.memory.belief_judge, km.BeliefJudge)
        assert manager.memory.belief_judge.adapter is adapter
        one = manager.memory.remember(OLD, space=SPACE, stack=True)
        server.replies.append(verdict(True))
        two = manager.memory.remember(NEW, space=SPACE, stack=True)
        assert item_of(two) == item_of(one) and len(server.requests) == 1
    finally:
        asyncio.run(manager.close())


def test_a_manager_without_an_adapter_builds_a_memory_without_a_judge():
    manager = km.UniversalMemoryManager(memory_retrieve=lambda **_: {})
    try:
        assert manager.memory.belief_judge is None
    finally:
        asyncio.run(manager.close())


def test_revise_asks_the_judge_when_the_rules_cannot_tell_the_subject_and_a_no_creates(server):
    memory = judged_memory(server)
    one = memory.remember(SUBJECTLESS_OLD, space=SPACE)
    server.replies.append(verdict(False, "deploys and releases are two schedules"))
    result = memory.revise(item_of(one), SUBJECTLESS_NEW)
    assert result["outcome"] == "created" and item_of(result["kref"]) != item_of(one)
    assert result["reason"] == "the belief judge: deploys and releases are two schedules"
    assert result["decided_by"] == "judge" and result["judge"]["compared_with"] == one
    assert memory.get(result["kref"])["metadata"]["belief_judge"]["same_belief"] is False
    assert memory.get(item_of(one))["content"] == SUBJECTLESS_OLD
    assert json.loads(server.bodies()[-1]["messages"][1]["content"]) == {"stored": SUBJECTLESS_OLD,
                                                                          "new": SUBJECTLESS_NEW}


def test_revise_with_a_judge_that_says_yes_revises_the_target(server):
    memory = judged_memory(server)
    one = memory.remember(SUBJECTLESS_OLD, space=SPACE)
    server.replies.append(verdict(True, "both say when code ships"))
    result = memory.revise(item_of(one), SUBJECTLESS_NEW)
    assert result["outcome"] == "revised" and result["kref"] == item_of(one) + "?r=2"
    assert result["decided_by"] == "judge" and result["reason"] == "the target named by revise()"
    assert memory.get(result["kref"])["metadata"]["belief_judge"]["same_belief"] is True


@pytest.mark.parametrize("action", ["http500", "garbage"])
def test_revise_keeps_the_explicit_target_when_the_judge_fails(server, action):
    memory = judged_memory(server)
    one = memory.remember(SUBJECTLESS_OLD, space=SPACE)
    if action == "http500":
        server.script("status", code=500)
    else:
        server.script("garbage")
    result = memory.revise(item_of(one), SUBJECTLESS_NEW)
    assert result["outcome"] == "revised" and item_of(result["kref"]) == item_of(one)
    assert "decided_by" not in result and isinstance(memory.last_judge_error, km.ServiceError)
    assert "belief_judge" not in memory.get(result["kref"])["metadata"]


def test_revise_does_not_ask_the_judge_what_the_rules_decide(server):
    memory = judged_memory(server)
    city = memory.remember("Zed Quinn lives in Paris", space=SPACE)
    assert memory.revise(item_of(city), "Zed Quinn moved to Rome")["outcome"] == "revised"   # same subject
    other = memory.revise(item_of(city), "Ann Quinn cycles to the office now")                 # another one
    assert other["outcome"] == "created" and "another subject" in other["reason"]
    meeting = memory.remember("The meeting day is Monday.", space=SPACE)
    assert memory.revise(item_of(meeting), "The meeting day is Tuesday.")["outcome"] == "revised"
    assert server.requests == []


# -- 0.8.7: the judge picks among the speaker's statements when the rules find none to compare with ---------------

CHAT = "chat"
ANN = {"speaker": "user", "user_id": "ann"}
CARRIER = "My mobile carrier is EE."
SWITCH = "I'm on a smarty sim now, it's half the price"      # no word or relation in common with CARRIER


def pick(match, reason: str = "both say who the phone contract is with") -> str:
    return json.dumps({"match": match, "reason": reason})


def chat_memory(server: OpenAIServer, *said: str, **options) -> tuple[km.Memory, list[str]]:
    memory = km.Memory(None, clock=km.ManualClock("2026-01-01T00:00:00Z", tick=60), ids=km.SequentialIds(),
                       llm=km.BeliefJudge(openai_adapter(server, retries=0, timeout=5.0), **options))
    # (what was said before is stored as it is: with the judge asked of any statement, stack=True would ask of these)
    return memory, [memory.remember(text, space=CHAT, metadata=dict(ANN)) for text in said]


def test_without_a_judge_a_change_in_other_words_is_a_new_belief():
    memory = km.Memory(None)
    one = memory.remember(CARRIER, space=CHAT, stack=True, metadata=dict(ANN))
    assert item_of(memory.remember(SWITCH, space=CHAT, stack=True, metadata=dict(ANN))) != item_of(one)


def test_the_judge_picks_the_statement_a_change_in_other_words_updates(server):
    memory, (carrier, tea, city) = chat_memory(server, CARRIER, "I drink green tea at work.", "I live in Leeds.")
    server.replies.append(pick(3))          # shown newest first when no statement shares a word with the message
    two = memory.remember(SWITCH, space=CHAT, stack=True, metadata=dict(ANN))
    body = server.bodies()[-1]
    shown = json.loads(body["messages"][1]["content"])
    assert shown == {"earlier": [{"n": 1, "text": "I live in Leeds."}, {"n": 2, "text": "I drink green tea at work."},
                                 {"n": 3, "text": CARRIER}], "new": SWITCH}
    assert "match" in body["messages"][0]["content"]
    assert body["response_format"]["json_schema"]["schema"]["required"] == ["match", "reason"]
    assert item_of(two) == item_of(carrier) and two.endswith("?r=2")
    assert memory.get(two)["metadata"]["belief_judge"] == {
        "same_belief": True, "reason": "both say who the phone contract is with", "compared_with": carrier,
        "picked_from": 3}
    assert memory.get(item_of(tea))["content"] == "I drink green tea at work."


def test_a_judge_that_picks_none_keeps_a_new_belief_and_says_why(server):
    memory, (carrier,) = chat_memory(server, CARRIER)
    server.replies.append(pick(None, "the message names no earlier fact"))
    two = memory.remember(SWITCH, space=CHAT, stack=True, metadata=dict(ANN))
    assert item_of(two) != item_of(carrier)
    assert memory.get(two)["metadata"]["belief_judge"] == {
        "same_belief": False, "reason": "the message names no earlier fact", "compared_with": None, "picked_from": 1}


@pytest.mark.parametrize("reply", [
    pick(0), pick(2), '{"match": "1", "reason": "x"}', '{"match": true, "reason": "x"}',
    '{"match": 1.0, "reason": "x"}',
    '{"match": 1}', '{"match": 1, "reason": "x", "confidence": 1}', "It is the first one.", "[1]"],
    ids=["zero", "past-the-end", "string", "bool", "float", "missing-reason", "extra-key", "prose", "array"])
def test_a_malformed_pick_keeps_the_rule_decision(server, reply):
    memory, (carrier,) = chat_memory(server, CARRIER)
    server.replies.append(reply)
    two = memory.remember(SWITCH, space=CHAT, stack=True, metadata=dict(ANN))
    assert len(server.requests) == 1 and item_of(two) != item_of(carrier)
    assert memory.get(item_of(carrier))["content"] == CARRIER and memory.get(two)["content"] == SWITCH
    assert "belief_judge" not in memory.get(two)["metadata"]
    assert isinstance(memory.last_judge_error, km.ServiceError) and not memory.last_judge_error.transient


@pytest.mark.parametrize("text, metadata", [
    (SWITCH, {"speaker": "assistant", "user_id": "ann"}),          # an assistant's message
    (SWITCH, None),                                                # a note: no speaker
    ("Should I switch to giffgaff now?", ANN),                     # a question
    ("I might switch to giffgaff next month", ANN),                # only meant
    ("I'm on a giffgaff sim for now while mine is unlocked", ANN),  # a stand-in
    ("I also got a giffgaff sim now for the tablet", ANN),         # one more
    # a hostile review's: a plan, a future, a denial, a condition, reported speech, another's news, a role
    ("I'm going to switch to giffgaff", ANN), ("I will switch to giffgaff next week", ANN),
    ("I didn't switch to giffgaff in the end", ANN), ("if I switched to giffgaff now it'd be cheaper", ANN),
    ("my friend said \"I just switched to giffgaff\"", ANN),
    ("the ad says everyone's switching to giffgaff now", ANN),
    (SWITCH, {"speaker": "user", "user_id": "ann", "role": "assistant"}),
    # 0.8.9: a request to the assistant, a reply that says nothing more
    ("Write me a complaint letter about the signal", ANN), ("can you summarise my phone bill", ANN),
    ("please draft an email to giffgaff", ANN), ("thanks, that really helps", ANN), ("ok cool", ANN), ("lol", ANN),
    # 0.8.9, a hostile review's: more requests, a name alone, code, a plan, hearsay, a stand-in, one more
    ("Continue", ANN), ("Recommend a good sci-fi book", ANN), ("giffgaff", ANN), ("makes sense", ANN),
    ("https://example.com/article/123", ANN), ("```\nimport os\nprint(os.getcwd())\n```", ANN),
    ("about to start a new job at Google", ANN), ("starting at Google in two weeks", ANN),
    ("my doctor reckons I'm allergic to nuts", ANN), ("using my sister's car this week", ANN),
    ("got a second cat", ANN)])
def test_the_judge_is_not_asked_to_pick_for_other_kinds_of_message(server, text, metadata):
    memory, _ = chat_memory(server, CARRIER)
    memory.remember(text, space=CHAT, stack=True, metadata=dict(metadata) if metadata else None)
    assert server.requests == []


@pytest.mark.parametrize("text", [
    "I like giffgaff's adverts", "My sister switched to giffgaff now", "giffgaff's signal is great in my flat",
    "thanks! I'm with giffgaff",
    "please note, my favourite colour is green", "Theo blew out five candles on sunday",
    # a hostile review's: hearsay or a denial in an aside keeps no clause that tells of a fact from the judge
    "I'm with giffgaff, my brother said it's the cheapest",
    "bouldering is my thing, my physio said it is good for my knees"])
def test_any_statement_no_rule_ties_is_asked_about_unless_the_judge_is_told_only_changes(server, text):
    """0.8.9: with ``pick_any`` (the default) a statement needs no word of change to be asked about; without
    it, only one that tells of a change in words, of the speaker's own, is."""
    memory, _ = chat_memory(server, CARRIER)
    server.replies.append(pick(None, "none of them"))
    two = memory.remember(text, space=CHAT, stack=True, metadata=dict(ANN))
    assert len(server.requests) == 1 and memory.get(two)["metadata"]["belief_judge"]["same_belief"] is False
    memory, _ = chat_memory(server, CARRIER, pick_any=False)
    server.requests.clear()
    memory.remember(text, space=CHAT, stack=True, metadata=dict(ANN))
    assert server.requests == []
    with pytest.raises(km.InvalidArgumentError):
        km.BeliefJudge(km.OpenAICompatAdapter("http://127.0.0.1:9/v1", model="m"), pick_any=1)


def test_the_pick_is_bounded(server):
    memory, _ = chat_memory(server, CARRIER + " " + "It has good coverage. " * 80, pick_candidates=5, max_chars=300)
    for index in range(12):                      # twelve more memories of the speaker's, each its own item
        memory.remember(f"Note {index}: the wifi password changed", space=CHAT, metadata=dict(ANN))
    server.replies.append(pick(None))
    memory.remember(SWITCH, space=CHAT, stack=True, metadata=dict(ANN))
    shown = json.loads(server.bodies()[-1]["messages"][1]["content"])
    assert len(shown["earlier"]) == 5 and all(len(entry["text"]) <= 300 for entry in shown["earlier"])


def test_a_judge_with_no_pick_candidates_never_picks(server):
    memory, (carrier,) = chat_memory(server, CARRIER, pick_candidates=0)
    memory.remember(SWITCH, space=CHAT, stack=True, metadata=dict(ANN))
    assert server.requests == []
    adapter = km.OpenAICompatAdapter("http://127.0.0.1:9/v1", model="m")
    for value in (-1, True, 1.5, km.JUDGE_PICK_MAX + 1):
        with pytest.raises(km.InvalidArgumentError):
            km.BeliefJudge(adapter, pick_candidates=value)


def test_the_judge_is_shown_only_the_speakers_own_current_facts_that_may_be_revised(server):
    memory, (carrier,) = chat_memory(server, CARRIER)
    said = lambda text, **options: memory.remember(text, space=CHAT, **options)   # noqa: E731
    said("My broadband is with Sky.", metadata=dict(ANN), key="broadband")                      # keyed
    said("My energy supplier is Octopus.", metadata=dict(ANN), evidence_level="official")       # official
    said("My gym is PureGym.", metadata={"speaker": "user", "user_id": "bob"})                  # another speaker
    said("I use Firefox at work.", metadata={"speaker": "assistant", "user_id": "ann"})         # an assistant
    said("My sister lives in Leeds.", metadata=dict(ANN))                                       # another's fact
    said("Call me on 07700 900123 any time.", metadata=dict(ANN))                               # personal data
    gone = said("My dentist is Dr Shah.", metadata=dict(ANN))
    memory.deprecate(gone)                                                                      # retracted
    server.replies.append(pick(None))
    memory.remember(SWITCH, space=CHAT, stack=True, metadata=dict(ANN))
    shown = json.loads(server.bodies()[-1]["messages"][1]["content"])["earlier"]
    # the speaker's statements about others are shown too ("Theo blew out five candles" updates "my son Theo is
    # four"), unless the judge is asked only of the speaker's own changes
    assert sorted(entry["text"] for entry in shown) == [CARRIER, "My sister lives in Leeds."]
    memory.belief_judge.pick_any = False
    server.replies.append(pick(None))
    memory.remember("I swapped my bike for a scooter", space=CHAT, stack=True, metadata=dict(ANN))
    shown = json.loads(server.bodies()[-1]["messages"][1]["content"])["earlier"]
    assert sorted(entry["text"] for entry in shown) == sorted([CARRIER, SWITCH])     # not the sister's


class RevisingJudge:
    """An LLM stand-in that, while it answers, has another writer revise the statement it picks."""

    def __init__(self) -> None:
        self.memory: km.Memory | None = None
        self.target = ""

    async def chat(self, *, messages, model="", system="", max_tokens=1024, json_mode=False) -> str:
        self.memory.remember("My mobile carrier is Three.", item=self.target, space=CHAT, metadata=dict(ANN))
        return pick(1)


def test_a_pick_of_a_statement_revised_meanwhile_keeps_the_rule_decision():
    judge = RevisingJudge()
    memory = km.Memory(None, llm=judge)
    judge.memory = memory
    carrier = memory.remember(CARRIER, space=CHAT, stack=True, metadata=dict(ANN))
    judge.target = str(km.Kref.parse(carrier).item_kref())
    two = memory.remember(SWITCH, space=CHAT, stack=True, metadata=dict(ANN))
    assert item_of(two) != item_of(carrier)                          # a new belief: the one shown had moved on
    assert memory.get(item_of(carrier))["content"] == "My mobile carrier is Three."
    assert len(memory.history(item_of(carrier))) == 2


def test_a_judges_reason_is_stored_without_control_characters(server):
    memory, (carrier,) = chat_memory(server, CARRIER)
    server.replies.append(pick(1, "same\u0000 carrier\u202e, new sim"))
    two = memory.remember(SWITCH, space=CHAT, stack=True, metadata=dict(ANN))
    assert memory.get(two)["metadata"]["belief_judge"]["reason"] == "same carrier, new sim"


def test_after_a_no_to_the_close_candidates_the_judge_picks_among_the_others(server):
    memory, (carrier, commute) = chat_memory(server, "My mobile carrier is EE.", "I commute 40 minutes by train.")
    server.replies.extend([verdict(False, "a commute and a habit are two facts"), pick(None, "none of them")])
    memory.remember("I cycle to the office now", space=CHAT, stack=True, metadata=dict(ANN))
    first, second = server.bodies()
    assert json.loads(first["messages"][1]["content"])["stored"].endswith("commute 40 minutes by train.")
    assert [entry["text"] for entry in json.loads(second["messages"][1]["content"])["earlier"]] == [
        "My mobile carrier is EE."]                                   # not the one it already said no to


def test_after_a_failure_on_the_close_candidates_the_judge_is_not_asked_to_pick(server):
    memory, _ = chat_memory(server, "My mobile carrier is EE.", "I commute 40 minutes by train.")
    server.script("status", code=500)
    two = memory.remember("I cycle to the office now", space=CHAT, stack=True, metadata=dict(ANN))
    assert len(server.requests) == 1 and "belief_judge" not in memory.get(two)["metadata"]


def test_the_judge_is_never_shown_personal_data(server):
    """0.8.9: with any user statement put before the judge, what it is shown has personal data anonymized (as
    consolidation's summaries do), in the message and in the statements it compares or picks from."""
    memory, _ = chat_memory(server, CARRIER)
    server.replies.append(pick(None, "none of them"))
    two = memory.remember("text me on +44 7700 900123 or ann.lee@example.org from now", space=CHAT, stack=True,
                          metadata=dict(ANN))
    asked = server.bodies()[-1]["messages"][1]["content"]
    assert "7700" not in asked and "example.org" not in asked and "[phone]" in asked and "[email]" in asked
    assert memory.get(two)["content"].startswith("text me on +44 7700 900123")    # what is stored is as written
    judge = memory.belief_judge
    question = judge.messages("My email is ann.lee@example.org", "my email is now ann@example.com")
    assert "example" not in question[0]["content"] and question[0]["content"].count("[email]") == 2


def test_a_speakers_id_that_is_personal_data_is_never_shown_to_the_judge(server):
    """0.8.9, a hostile review's: a statement is shown with its first person written as the speaker's name, and a
    ``user_id`` that is an email address became "Ann-Smith-Example-Com"; now such a name is a made-up one, the
    same for the same id (so two speakers stay two)."""
    email = {"speaker": "user", "user_id": "ann.smith@example.com"}
    memory = km.Memory(None, clock=km.ManualClock("2026-01-01T00:00:00Z", tick=60), ids=km.SequentialIds(),
                       llm=km.BeliefJudge(openai_adapter(server, retries=0, timeout=5.0)))
    memory.remember("I commute by train", space=CHAT, metadata=dict(email))
    server.replies.extend([verdict(False), pick(None)] * 2)
    memory.remember("cycling to the office every day lately", space=CHAT, stack=True, metadata=dict(email))
    asked = " ".join(body["messages"][1]["content"] for body in server.bodies())
    assert server.requests and "smith" not in asked.casefold() and "example" not in asked.casefold()
    assert km._written_name("ann.smith@example.com") == km._written_name("Ann.Smith@example.com ") != \
        km._written_name("bob@example.com")
    assert km._written_name("ann lee") == "Ann-Lee"


def test_personal_data_split_over_lines_is_anonymized_before_the_judge_sees_it(server):
    memory, _ = chat_memory(server, "my visa is 4111\n1111\n1111\n1111", CARRIER)
    server.replies.append(pick(None))
    memory.remember("got a new number, 0770\n0900\n123 now", space=CHAT, stack=True, metadata=dict(ANN))
    asked = server.bodies()[-1]["messages"][1]["content"]
    assert "4111" not in asked and "0900" not in asked


def test_the_judge_picks_only_among_statements(server):
    """Questions, requests and replies the speaker sent earlier are not shown as statements a message updates."""
    memory, _ = chat_memory(server, CARRIER, "can you find me a cheaper phone deal?", "write me a complaint letter",
                            "thanks, that helps", "Where should I eat tonight")
    server.replies.append(pick(None))
    memory.remember(SWITCH, space=CHAT, stack=True, metadata=dict(ANN))
    shown = json.loads(server.bodies()[-1]["messages"][1]["content"])["earlier"]
    assert [entry["text"] for entry in shown] == [CARRIER]
