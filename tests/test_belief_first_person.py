"""Issue 16: beliefs as people speak -- first person, an explicit revise target, exact identifiers, corrections
in other words, and recall that never serves a superseded value first."""

from __future__ import annotations

import json
import os

import hypothesis
import pytest
from hypothesis import strategies as st

import kumiho_memory as km

ANN = {"speaker": "user", "user_id": "ann"}
SPACE = "chat"


def item_of(kref: str) -> str:
    return str(km.Kref.parse(kref).item_kref())


def said(memory: km.Memory, text: str, metadata=ANN) -> str:
    return memory.remember(text, space=SPACE, stack=True, metadata=dict(metadata) if metadata else None)


# -- 1. first person is a subject -----------------------------------------------------------------------

@pytest.mark.parametrize("text, subject", [
    ("I live in Berlin.", "ann"), ("Actually I moved to Munich last month.", "ann"),
    ("My daughter just turned 8.", "ann daughter"), ("my manager lives in Leeds", "ann manag"),
    ("my manager is Bob", "ann"),                 # who holds a one-person relation: about the speaker (manager)
    ("These days my favourite band is Arcade Fire.", "ann"), ("I've gone back to light mode.", "ann")])
def test_first_person_names_the_speaker(text, subject):
    assert km.statement_subject(text, speaker="ann") == subject


def test_speaker_comes_from_the_metadata():
    assert km.speaker_name({"speaker": "user", "user_id": "ann"}) == "ann"
    assert km.speaker_name({"speaker": "Dana"}) == "Dana"
    assert km.speaker_name({"role": "assistant", "user_id": "ann"}) == "Assistant"
    assert km.speaker_name({}) == km.SPACE_USER


# (old, correction, question, new value): the twelve first-person pairs of probes/belief_updates.py
PAIRS = [
    ("I live in Berlin.", "Actually I moved to Munich last month.", "Where do I live?"),
    ("I work at Acme as a designer.", "I just started a new job at Globex.", "Where do I work?"),
    ("I drive a Honda Civic.", "I sold the Civic and bought a Tesla.", None),
    ("I use vim for editing code.", "I switched from vim to VS Code.", None),
    ("My daughter is 7 years old.", "My daughter just turned 8.", None),
    ("I prefer dark mode.", "I've gone back to light mode.", "Do I like dark mode or light mode?"),
    ("My favourite band is Radiohead.", "These days my favourite band is Arcade Fire.", "What is my favourite band?"),
    ("My phone is an iPhone 12.", "I replaced the iPhone with a Pixel 8.", None),
    ("I'm vegetarian.", "I've started eating meat again, so I'm no longer vegetarian.", None),
    ("I wake up at 6am.", "These days I get up at 7:30.", None),
    ("My cat is named Tom.", "My cat is actually called Tommy.", None),
    ("I'm planning a trip to Japan in May.", "My trip is now to Korea instead.", None),
]


@pytest.mark.parametrize("old, new, question", PAIRS, ids=[pair[0] for pair in PAIRS])
def test_a_first_person_correction_revises_the_belief(memory, old, new, question):
    for control in ("My son is 12 years old.", "My sister lives in Lisbon.", "Bob lives in Munich.",
                    "My brother drives a Volvo."):
        said(memory, control)
    first = said(memory, old)
    second = said(memory, new)
    assert item_of(second) == item_of(first), f"{new!r} did not revise {old!r}"
    for item in memory.items():
        assert len(memory.history(item["item_kref"])) == (2 if item["item_kref"] == item_of(first) else 1)
    if question:
        assert memory.recall(question, space=SPACE)[0]["content"] == new


def test_look_alikes_of_the_speaker_stay_apart(memory):
    daughter = said(memory, "My daughter is 7 years old.")
    son = said(memory, "My son is 12 years old.")
    sister = said(memory, "My sister lives in Lisbon.")
    me = said(memory, "I live in Berlin.")
    assert len({item_of(daughter), item_of(son), item_of(sister), item_of(me)}) == 4
    other = said(memory, "I live in Oslo.", {"speaker": "user", "user_id": "bob"})
    assert item_of(other) != item_of(me)


DANA = {"speaker": "user", "user_id": "dana"}


def test_a_third_person_statement_about_the_user_joins_the_belief(memory):
    mine = said(memory, "I live in Berlin.", DANA)
    assert km.statement_subject(km.resolved_statement("I live in Berlin.", {"user_id": "dana"})) == "dana"
    note = said(memory, "Dana moved to Porto.", {"role": "assistant"})
    assert item_of(note) == item_of(mine), "the assistant's note about Dana did not revise her own statement"
    again = said(memory, "Dana lives in Porto now.", None)
    assert item_of(again) == item_of(mine)
    assert memory.recall("Where does Dana live?", space=SPACE)[0]["content"] == "Dana lives in Porto now."


def test_a_third_person_statement_about_the_users_relative_joins_theirs(memory):
    daughter = said(memory, "My daughter is 7 years old.", DANA)
    son = said(memory, "My son is 12 years old.", DANA)
    later = said(memory, "Dana's daughter just turned 8.", None)
    assert item_of(later) == item_of(daughter) and item_of(later) != item_of(son)
    other = said(memory, "Bob's daughter just turned 9.", None)
    assert item_of(other) not in (item_of(daughter), item_of(son))


def test_a_named_speaker_is_a_user_too(memory):
    mine = said(memory, "I work at Acme.", {"speaker": "Dana"})
    note = said(memory, "Dana now works at Globex.", None)
    assert item_of(note) == item_of(mine)
    stranger = said(memory, "Erin now works at Initech.", None)
    assert item_of(stranger) != item_of(mine)


def test_the_spaces_user_is_who_i_is_without_metadata(memory):
    assert km.speaker_name({}, "Eve") == "Eve" and km.speaker_name({"user_id": "ann"}, "Eve") == "ann"
    km.set_space_attribute(memory, "eve-chat", km.SPACE_USER_ATTRIBUTE, "Eve")
    mine = memory.remember("I work at Acme.", space="eve-chat", stack=True)
    note = memory.remember("Eve now works at Globex.", space="eve-chat", stack=True)
    assert item_of(note) == item_of(mine)
    elsewhere = memory.remember("I work at Acme.", space="other-chat", stack=True)
    assert item_of(memory.remember("Eve now works at Globex.", space="other-chat", stack=True)) != item_of(elsewhere)


def test_we_and_our_are_the_users_group(memory):
    assert km.statement_subject("We moved to Leeds.", speaker="ann") == km.statement_subject(
        "Our office is in Leeds.", speaker="ann") == "ann group"
    home = said(memory, "We live in Berlin.")
    moved = said(memory, "Actually we moved to Leeds.")
    mine = said(memory, "I live in Paris.")
    office = said(memory, "Our office is in Leeds.")
    assert item_of(moved) == item_of(home)
    assert len({item_of(home), item_of(mine), item_of(office)}) == 3
    theirs = said(memory, "We live in Oslo.", {"speaker": "user", "user_id": "bob"})
    assert item_of(theirs) != item_of(home)


# -- 2. an explicit target decides ------------------------------------------------------------------------

@pytest.mark.parametrize("old, new", [
    ("The meeting day is Monday.", "The meeting day is Tuesday."),
    ("The backend is written in Python.", "The backend is written in Rust."),
    ("The conference is in Seoul.", "The conference is in Tokyo."),
    ("The default model is GPT-4.", "The default model is Claude-4."),
    ("The office wifi network is called Harbor-5.", "The office wifi network was renamed Lighthouse-9."),
])
def test_revise_with_an_explicit_target_revises_it(memory, old, new):
    first = memory.remember(old, space="facts")
    result = memory.revise(item_of(first), new)
    assert result["outcome"] == "revised", result
    assert memory.get(item_of(first))["content"] == new


def test_revise_says_why_it_created_a_new_item(memory):
    first = memory.remember("Bob lives in Paris", space="facts")
    result = memory.revise(item_of(first), "Alice lives in Paris")
    assert result["outcome"] == "created" and "another subject" in result["reason"]
    first = memory.remember("The value of a_val is 1", space="facts")
    result = memory.revise(item_of(first), "The value of b_val is 2")
    assert result["outcome"] == "created" and "identifier" in result["reason"]


def test_the_value_is_not_the_subject():
    assert km.statement_subject("The meeting day is Monday.") is None
    assert km.statement_subject("The office wifi network is called Harbor-5.") is None
    assert km.statement_subject("Actually the dog Nina Tanaka has is named Rex") == "nina tanaka"


# -- 3. identifiers are exact -----------------------------------------------------------------------------

@pytest.mark.parametrize("old, new", [("The value of a_val is 1", "The value of b_val is 2"),
                                      ("skill_python is set to expert", "skill_rust is set to expert"),
                                      ("The db_choice flag is on", "The db_flavor flag is on"),
                                      ("The v1 endpoint returns JSON", "The v2 endpoint returns XML")])
def test_identifiers_are_exact(memory, old, new):
    assert not km.same_belief(old, new)
    one = memory.remember(old, space="facts", stack=True)
    two = memory.remember(new, space="facts", stack=True)
    assert item_of(one) != item_of(two)


def test_an_identifier_keeps_its_value_updates(memory):
    one = memory.remember("The value of a_val is 1", space="facts", stack=True)
    two = memory.remember("The value of a_val is 2", space="facts", stack=True)
    assert item_of(one) == item_of(two)


# -- 4. the registry covers what people correct about themselves ---------------------------------------------

@pytest.mark.parametrize("text, relation", [
    ("I work at Acme as a designer.", "role"), ("I switched from vim to VS Code.", "editor"),
    ("I prefer dark mode.", "display"), ("I'm vegetarian.", "diet"), ("I wake up at 6am.", "wake"),
    ("My phone is an iPhone 12.", "handset"), ("I'm planning a trip to Japan.", "trip"),
    ("My daughter just turned 8.", "age"), ("I report to Carol.", "manager"), ("We got a hamster.", "pet")])
def test_registry_names_what_people_correct(text, relation):
    assert relation in km.belief_relations(text)


def test_a_cue_and_the_old_value_tie_a_correction_to_its_belief():
    matcher = km.RelationMatcher(lambda word: [])
    beliefs = ["Ann drives a Honda Civic.", "Ann lives in Berlin."]
    assert matcher.corrected("Ann sold the Civic and bought a Tesla.", beliefs) == 0
    assert matcher.corrected("Ann bought a Tesla.", beliefs) is None            # no cue, no old value


def test_a_value_of_a_known_kind_ties_a_correction_in_other_words():
    store = ["Bob's favorite sport is judo", "Carol's favourite sport is judo", "Dan's favorite food is pho",
             "Erin plays judo every weekend", "Ann's favorite sport is rugby", "Ann's favorite food is pasta"]
    matcher = km.RelationMatcher(lambda word: [text for text in store if word in km._words(text)])
    assert matcher.value_kind("judo") == "favorite:sport" \
        and matcher.value_relation("Ann is into judo") == "favorite:sport"
    assert matcher.value_kind("plays") is None               # a word before the relation is not its value
    beliefs = ["Ann's favorite food is pasta", "Ann's favorite sport is rugby"]
    assert matcher.corrected("Update: Ann is into judo these days", beliefs) == 1
    assert matcher.corrected("Ann is obsessed with pho now", beliefs) == 0
    assert matcher.corrected("Ann is into judo and pho", beliefs) is None           # two kinds: unsure


def test_a_possessed_attribute_is_not_another_relations_value():
    store = ["Bob moved to Leeds", "Carol lives in Leeds", "Dan's home is in Leeds"]
    matcher = km.RelationMatcher(lambda word: [text for text in store if word in km._words(text)])
    assert km.possessed_attribute("Ann's office is in Leeds.") == "office"
    assert km.possessed_attribute("Ann's car is a Volvo") is None \
        and km.possessed_attribute("Ann's daughter is 8") is None
    assert matcher.corrected("Ann's office is in Leeds.", ["Ann lives in Berlin."]) is None
    assert matcher.corrected("Ann is in Leeds these days.", ["Ann lives in Berlin."]) == 0


@pytest.mark.parametrize("text, relation", [
    ("I live in Lyon, in a flat near Part-Dieu station.", "residence"), ("Ann moved to Bordeaux.", "residence"),
    ("Ann's grandmother is 89.", "age"), ("Ann's dad's birthday was Sunday, he's 69.", "age"),
    ("Elsie turned seven yesterday.", "age"), ("I got promoted, I'm a senior analyst now.", "role"),
    ("My title at work is junior analyst.", "role"), ("I'm a backend developer on the payments squad.", "role"),
    ("Ann's boss is Priya.", "manager"), ("Sofia and Ann broke up; Ann is seeing Leah these days.", "partner"),
    ("I take the train to work.", "commute"), ("I bank with Barclays.", "bank"), ("I hit the gym at 7pm.", "exercise"),
    ("I take sertraline 50mg every morning.", "medication"), ("I've torn my right hamstring.", "health"),
    ("Our honeymoon is going to be in Bali.", "trip"), ("Our broadband is with Virgin Media.", "internet"),
    ("I go to bed at 11pm.", "bedtime"), ("Wendy's sport is football", "favorite:sport"),
    ("Lately my favourite writer has been Ishiguro.", "favorite:author"),
    ("Ann's commute is 40 minutes by train.", "attribute:commute")])
def test_registry_covers_more_of_what_people_correct(text, relation):
    assert relation in km.belief_relations(text)


@pytest.mark.parametrize("text, not_relation", [
    ("I take the train to work.", "employer"), ("I do all my work on a ThinkPad.", "employer"),
    ("I hit the gym at 7pm after work.", "employer"), ("I've moved my gym sessions to Thursdays.", "residence"),
    ("Moved my current account over to Monzo.", "residence"), ("Since moving out west I go to games.", "residence"),
    ("My commute is 40 minutes by train.", "commute"), ("Ann's gym sessions moved to Fridays.", "residence"),
    ("Ann's yoga class got moved to Wednesdays", "residence"), ("Ann's cat is 12.", "age"),
    ("Ann's car is 10 years old.", "age"), ("I joined a running club.", "employer")])
def test_words_of_work_and_moving_that_name_no_employer_or_home(text, not_relation):
    assert not_relation not in km.belief_relations(text)


@pytest.mark.parametrize("text, subject", [
    ("My best friend Aoife works at Deloitte.", "ann best friend"), ("My ex-wife lives in Rome.", "ann ex wife"),
    ("My new boss lives in Leeds.", "ann boss"), ("My mum is allergic to peanuts.", "ann mother"),
    ("Grandma celebrated her 90th birthday.", "ann grandmoth"), ("Dad's birthday was Sunday, he's 69.", "ann father"),
    ("My boss is Priya.", "ann"), ("My girlfriend is called Sofia.", "ann"),
    ("Moved to Bordeaux last weekend.", "ann"), ("Sold the Civic. New car: Kia EV6.", "ann"),
    ("Northwind let me go, and Fabrikam took me on in March.", "ann"), ("Sofia and I broke up.", "ann"),
    ("Bob told me he moved to Paris.", "bob"), ("Jared works at Globex.", "jare"),
    ("Lately my favourite writer has been Ishiguro.", "ann")])
def test_who_a_users_message_is_about(text, subject):
    assert km.statement_subject(km.first_person(text, "ann")) == subject


def test_an_assistants_message_is_never_rewritten_as_the_users():
    assert km.first_person("Moved the meeting to Friday.", "Assistant") == "Moved the meeting to Friday."
    assert km.first_person("Bob told me he moved.", "Assistant") == "Bob told Assistant he moved."


@pytest.mark.parametrize("old, new", [
    ("My boss is Priya.", "Priya moved teams, so I report to Marco now."),
    ("My grandmother is 89.", "Grandma celebrated her 90th birthday last weekend."),
    ("My dad is 68.", "Dad's birthday was Sunday, he's 69 and still acts like a teenager."),
    ("I live in Lyon, in a flat near Part-Dieu station.", "Moved to Bordeaux last weekend, still living out of boxes."),
    ("I bank with Barclays.", "Moved my current account over to Monzo."),
    ("My employer is a bank called Northwind.", "Northwind let me go, and Fabrikam took me on in March."),
    ("My commute is 40 minutes by train.", "Since the move my commute is only 15 minutes."),
    ("I take the train to work.", "I bike to the office these days, about 25 minutes each way."),
    ("My standup is at 9:15 every morning.", "My standup got pushed to 10 o'clock."),
    ("Next month I'm going to Iceland.", "The Iceland plan fell through, so I'm heading to Norway next month.")])
def test_first_person_corrections_in_other_words(memory, old, new):
    one = said(memory, old)
    assert item_of(said(memory, new)) == item_of(one)


def test_a_relative_introduced_by_name_is_that_relative_later(memory):
    elsie = said(memory, "My daughter Elsie is 6.")
    tom = said(memory, "My son Tom is 9.")
    assert item_of(said(memory, "Elsie turned seven yesterday, we had a bouncy castle.")) == item_of(elsie)
    assert item_of(said(memory, "Tom turned ten last week.")) == item_of(tom)
    assert memory.get(item_of(tom))["content"] == "Tom turned ten last week."
    # a name the speaker never introduced is nobody's relative
    assert item_of(said(memory, "Mia turned seven.")) not in {item_of(elsie), item_of(tom)}


@pytest.mark.parametrize("text, negated", [
    ("Turns out it was never penicillin, I'm allergic to amoxicillin.", {"penicillin"}),
    ("Shellfish is fine, it's sesame I react to.", {"shellfish"}), ("Biscuit passed away in January.", {"biscuit"}),
    ("I'm allergic to amoxicillin.", set())])
def test_values_said_to_be_wrong_or_gone(text, negated):
    assert km.negated_values(text) == negated


def test_a_denied_old_value_corrects_even_a_many_valued_relation(memory):
    old = said(memory, "I'm allergic to penicillin.")
    other = said(memory, "I'm allergic to cats.")
    new = said(memory, "Turns out it was never penicillin, I'm allergic to amoxicillin.")
    assert item_of(new) == item_of(old) and memory.get(item_of(other))["content"] == "I'm allergic to cats."
    also = said(memory, "I'm allergic to nuts too, not just amoxicillin.")        # adds one: a belief of its own
    assert item_of(also) not in {item_of(old), item_of(other)}


def test_a_relatives_move_is_still_a_move_and_a_visit_is_none():
    assert "residence" in km.belief_relations("Ann's best friend moved to Rome")
    assert "residence" in km.belief_relations("Ann's dad moved to Spain.")
    store = ["Bob moved to Paris", "Carol lives in Paris", "Dan moved to Rome"]
    matcher = km.RelationMatcher(lambda word: [text for text in store if word in km._words(text)])
    assert matcher.corrected("Ann visited Paris last week.", ["Ann lives in Berlin."]) is None
    assert matcher.corrected("Ann is in Paris these days.", ["Ann lives in Berlin."]) == 0


def test_look_alikes_of_other_people_and_other_attributes_stay_apart(memory):
    controls = ["My best friend Aoife works at Deloitte in Dublin.", "My brother just moved to Rotterdam.",
                "My best mate works at Google.",
                "My mum is allergic to peanuts, so we never have them in the house.", "Bob told me he moved to Paris.",
                "My boss lives in Leeds."]
    items = {item_of(said(memory, text)) for text in controls}
    mine = ["I work at Vantara Logistics on the data team.", "I do all my work on a ThinkPad X1 Carbon.",
            "I take the train to work.", "I live in Lyon.", "I'm allergic to shellfish.", "I drive a Golf.",
            "My commute is 40 minutes by train.", "My boss is Priya."]
    mine += ["My cat is 12.", "I'm 34.", "I joined a running club.", "My office moved to Lisbon.",
             "I'm moving my savings to Monzo.", "I visited Paris last week."]
    written = [item_of(said(memory, text)) for text in mine]
    assert len(set(written)) == len(written) and not set(written) & items


# -- the fresh held-out sets (written before any failure was looked at) -------------------------------------------

FRESH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "first_person_fresh.json")
FRESH2 = os.path.join(os.path.dirname(FRESH), "first_person_fresh2.json")


ISSUE_SETS = {number: os.path.join(os.path.dirname(FRESH), f"first_person_issue{number}.json") for number in (1, 2, 4)}


@pytest.mark.parametrize("path, size", [(FRESH, 20), (FRESH2, 30)] + [(path, 12) for path in ISSUE_SETS.values()],
                         ids=["fresh", "fresh2"] + [f"issue{number}" for number in ISSUE_SETS])
def test_the_fresh_held_out_sets_are_frozen_and_never_merge_unrelated_beliefs(memory, path, size):
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    assert len(data["pairs"]) == size and all(len(pair) == 4 and all(isinstance(part, str) for part in pair)
                                              for pair in data["pairs"])
    owner = {}
    for index, text in enumerate(data["controls"]):
        owner[item_of(said(memory, text, data["metadata"]))] = f"control {index}"
    firsts = [item_of(said(memory, old, data["metadata"])) for old, _, _, _ in data["pairs"]]
    assert len(set(firsts)) == len(firsts) and not set(firsts) & set(owner), "a first statement stacked"
    for index, (_, new, _, _) in enumerate(data["pairs"]):
        item = item_of(said(memory, new, data["metadata"]))
        assert item not in owner and (item == firsts[index] or item not in firsts), f"{new!r} merged wrongly"
    for item, text in zip(owner, data["controls"]):
        assert memory.get(item)["content"] == text


# -- 6. recall never serves a superseded value first --------------------------------------------------------

def test_recall_ranks_the_newer_of_two_unmerged_beliefs_first(memory):
    old = memory.remember("Alice lives in Paris and loves the Paris cafes in Paris", space="facts")
    new = memory.remember("Alice moved to Rome", space="facts")
    found = memory.recall("Where does Alice live in Paris?", space="facts")
    assert [hit["kref"] for hit in found[:2]] == [new, old]
    assert found[1]["signals"]["superseded_by"] == new and old in found[0]["signals"]["supersedes"]
    assert found[0]["score"] >= found[1]["score"]


def test_recall_leaves_other_subjects_and_many_valued_relations_alone(memory):
    bob = memory.remember("Bob lives in Paris, Paris, Paris", space="facts")
    memory.remember("Alice moved to Rome", space="facts")
    assert memory.recall("Paris live", space="facts")[0]["kref"] == bob
    tennis = memory.remember("Frank plays tennis, tennis every day", space="facts")
    memory.remember("Frank plays the piano", space="facts")
    assert memory.recall("Frank plays tennis", space="facts")[0]["kref"] == tennis


# -- 4. a user's own words again: a correction that names what it replaces (round 5) -----------------------
# Texts written for these tests; the probe's training set is tuned on, these are not from it.

ECHOED = [
    ("I drive a Mazda 3.", "the mazda got written off in the car park, picked up a used kia ceed"),
    ("i use a garmin venu for my runs", "ditched the garmin, wearing a coros now"),
    ("My son Theo is six.", "theo turned seven on friday, cake everywhere"),
    ("my eldest, Ines, does ballet on mondays", "ines has packed in ballet, it's gymnastics now"),
    ("we're going to Crete in June", "crete fell through so it's Sardinia instead"),
    ("I bank with Barclays", "closed the barclays account, all with Monzo now"),
    ("my go-to podcast is Cautionary Tales", "cautionary tales got knocked off the top spot by Hard Fork"),
]


@pytest.mark.parametrize("old, new", ECHOED, ids=[pair[0] for pair in ECHOED])
def test_a_correction_that_names_the_old_value_again_revises_it(old, new):
    memory = km.Memory(None)
    said(memory, "My flatmate drives a Fiat Panda.")          # someone else's look-alike stays apart
    first = said(memory, old)
    second = said(memory, new)
    assert item_of(second) == item_of(first)
    assert memory.get(item_of(first))["content"] == new


@pytest.mark.parametrize("stored, new", [
    ("I drive a Mazda 3.", "I washed the mazda on sunday"),                     # no word of change
    ("I drive a Mazda 3.", "my brother sold his mazda last week"),              # another person's
    ("I drive a Mazda 3.", "my sister's boyfriend sold the mazda he had"),      # another person's relative
    ("My son Theo is six.", "I started a pottery class"),                       # nothing named again
])
def test_what_names_a_word_again_without_changing_it_stays_apart(stored, new):
    memory = km.Memory(None)
    first = said(memory, stored)
    assert item_of(said(memory, new)) != item_of(first)
    assert memory.get(item_of(first))["content"] == stored


def test_two_beliefs_that_hold_the_word_leave_the_correction_a_new_belief():
    memory = km.Memory(None)
    one = said(memory, "I drive a Mazda 3.")
    two = said(memory, "I also keep an old mazda mx-5 for sunny days")
    new = said(memory, "sold the mazda last week")
    assert item_of(new) not in {item_of(one), item_of(two)}


def test_an_assistants_message_never_revises_by_naming_a_value_again():
    memory = km.Memory(None)
    first = said(memory, "I drive a Mazda 3.")
    new = said(memory, "the mazda got written off, so I picked up a kia", {"role": "assistant", "user_id": "ann"})
    assert item_of(new) != item_of(first)


def test_another_speakers_statement_is_not_a_correction_of_mine():
    memory = km.Memory(None)
    first = said(memory, "I drive a Mazda 3.")
    new = said(memory, "the mazda got written off, picked up a kia", {"speaker": "user", "user_id": "bob"})
    assert item_of(new) != item_of(first)


@pytest.mark.parametrize("text, owner", [
    ("I drive a Mazda 3.", "self"), ("the mazda got written off", "self"),
    ("my mum lives in Cardiff", "kin:mother"), ("mum sold up and moved to Tenby", "kin:mother"),
    ("my eldest, Ines, does ballet", "kin:eldest"), ("my girlfriend is called Sophie", "self"),
    ("sophie's new boyfriend works at Monzo", "other"), ("my girlfriend's dad supports Wrexham", "other"),
    ("a guy on my team just got promoted", "other"), ("Ava's moving to a four day week", "name:ava"),
    ("honestly, my brother Sam is at Exeter", "kin:brother"),
    # 0.8.7: a capital that only opens the sentence names nobody
    ("Cancelled the membership and joined a bouldering gym", "self"), ("Everything's on Linear now", "self"),
    ("The switch went through on Monday", "self"), ("Dropped that, started karate instead", "self"),
    ("Mildred moved to York", "name:mildred"), ("Alfred's retiring in May", "name:alfred")])
def test_whose_fact_a_chat_message_states(text, owner):
    assert km.chat_owner(text) == owner


def test_the_words_a_correction_says_changed_are_the_ones_near_a_word_of_change():
    assert {"mazda"} <= km.changed_words("the mazda got written off on the m4, picked up a used skoda")
    assert "skoda" in km.changed_words("the mazda got written off on the m4, picked up a used skoda")
    assert "holidai" not in km.changed_words("sold the trek on ebay, and the holiday in august was lovely")
    assert km.changed_words("I washed the car on sunday") == frozenset()
    anchors = km.echo_anchors("my bike is a trek road bike, I ride it every thursday")
    assert "trek" in anchors and "thursdai" not in anchors and "everi" not in anchors


@pytest.mark.parametrize("text, subject", [
    ("my girlfriend's dad supports Wrexham now", "ann girlfriend father"),     # a relative's relative
    ("My boyfriend is called Omar, we met at uni", "ann"),                       # who the partner is, and more
    ("my sister's husband works at Tesco", "ann sister husband")])
def test_who_a_chat_message_is_about_when_relatives_chain(text, subject):
    assert km.statement_subject(text, speaker="ann") == subject


def test_a_relatives_relative_never_joins_the_speakers_partner():
    memory = km.Memory(None)
    first = said(memory, "my boyfriend's mum supports Hibs these days")
    second = said(memory, "My boyfriend is called Omar, we met at uni")
    assert item_of(second) != item_of(first)


def test_a_word_of_change_ties_only_the_words_near_it():
    # "left" is a word of change, but "plane" is far from it: the stored film belief is not what changed
    memory = km.Memory(None)
    film = said(memory, "saw Aftersun on the plane and it's my new favourite film")
    new = said(memory, "left the airpods on the plane, bought some beats at the airport")
    assert item_of(new) != item_of(film)
    assert memory.get(item_of(film))["content"].startswith("saw Aftersun")


def test_recall_serves_the_message_that_names_a_value_again_above_it_when_they_were_not_merged():
    memory = km.Memory(None, clock=km.ManualClock("2026-01-01T00:00:00Z", tick=60))
    drive = said(memory, "I drive a Mazda 3.")
    said(memory, "I also keep an old mazda mx-5 for sunny days")
    sold = said(memory, "sold the mazda last week, got a kia sportage")
    assert item_of(sold) != item_of(drive)                 # two beliefs held the word: not merged
    found = memory.recall("which mazda do I drive?", space=SPACE, limit=5)
    order = [result["kref"] for result in found]
    assert order.index(sold) < order.index(drive)
    older = next(result for result in found if result["kref"] == drive)
    assert older["signals"]["superseded_by"] == sold


def test_another_speakers_message_never_outranks_mine_by_naming_my_value():
    memory = km.Memory(None, clock=km.ManualClock("2026-01-01T00:00:00Z", tick=60))
    drive = said(memory, "I drive a Mazda 3 and I love my Mazda")
    said(memory, "sold the mazda last week", {"speaker": "user", "user_id": "bob"})
    found = memory.recall("what car does Ann drive, the mazda?", space=SPACE, limit=5)
    mine = next(result for result in found if result["kref"] == drive)
    assert "superseded_by" not in (mine.get("signals") or {})


def test_a_lower_case_relative_opening_a_message_is_the_speakers():
    assert km.statement_subject("mum sold up and moved to Whitby", speaker="ann") == "ann mother"
    assert km.chat_owner("dad's swapped his old mazda for a tesla") == "kin:father"
    memory = km.Memory(None)
    first = said(memory, "My mum lives in Swansea")
    assert item_of(said(memory, "mum sold up and moved to Whitby to be near the sea")) == item_of(first)


def test_of_two_statements_named_again_the_nearest_to_the_word_of_change_is_corrected():
    memory = km.Memory(None)
    card = said(memory, "my credit card's a visa from halifax")
    said(memory, "i take my kindle everywhere")
    new = said(memory, "closed the halifax card, everywhere takes my amex now")
    assert item_of(new) == item_of(card)


def test_a_lower_case_name_that_owns_a_relative_is_someone_else():
    assert km.statement_subject("maya's new boyfriend works at Monzo apparently", speaker="ann") == "maya boyfriend"
    memory = km.Memory(None)
    mine = said(memory, "I work at Monzo on the payments team")
    assert item_of(said(memory, "maya's new boyfriend works at Monzo apparently")) != item_of(mine)


@pytest.mark.parametrize("stored, new", [
    ("I washed the car on sunday", "my car insurance renews in may"),          # the insurance is not the car
    ("i'm a member of the local chess club", "cancelled the gym, joined the pool in town instead"),
])
def test_look_alikes_in_chat_stay_apart(stored, new):
    memory = km.Memory(None)
    first = said(memory, stored)
    assert item_of(said(memory, new)) != item_of(first)


def test_something_that_was_not_working_is_no_employer():
    assert "employer" not in km.belief_relations("the new timetable just wasn't working for us")
    assert "employer" in km.belief_relations("I am not working at Acme anymore")
    memory = km.Memory(None)
    job = said(memory, "I work at Halden Foods in Leeds")
    assert item_of(said(memory, "Moved my yoga to Thursdays, Mondays just weren't working for me")) != item_of(job)


# -- round 6: chat as it is typed, more of what people correct, and fewer wrong merges ----------------------

@pytest.mark.parametrize("text", ["i moved to Leeds in may", "im a nurse at the royal infirmary",
                                  "ive got two cats", "i'm on the night bus home"])
def test_a_lower_case_i_is_the_speaker(text):
    assert km.resolved_statement(text, ANN).startswith(("Ann ", "As for Ann,"))
    assert km.resolved_statement(text, {"role": "assistant"}) == text      # an assistant's "i" stays as written


@pytest.mark.parametrize("text, relation", [
    ("i weigh 71kg", "weight"), ("down to 64 kg since the spring", "weight"), ("I'm on 48k now", "salary"),
    ("got a pay rise, it's 52k", "salary"), ("I quit smoking in june", "smoking"), ("three months sober", "drinking"),
    ("I browse with firefox", "browser"), ("the desktop runs ubuntu", "system"),
    ("my earbuds are pixel buds", "headphones"),
    ("I read on a kobo", "ereader"), ("I work nights at the depot", "hours"), ("we're on a four day week", "hours"),
    ("asleep by eleven most nights", "bedtime"), ("had my 40th on friday", "age"),
    ("home insurance is with admiral", "insurance"), ("octopus supply our gas and electric", "energy"),
    ("ported my number to voxi", "mobile network"), ("moved my playlists over to deezer", "music service"),
    ("my gp is dr rahman", "doctor"), ("signed up with an nhs dentist", "dentist"), ("we rent a tiny flat", "housing"),
    ("the blog is hosted on netlify", "hosting"), ("switched to bitwarden", "password manager"),
    ("work moved us onto teams", "work chat"), ("got a buzz cut", "hair"), ("I wear contact lenses", "eyesight"),
    ("two lattes a day", "coffee"), ("we go to St Mary's church", "faith"), ("my uncle's a plumber", "role"),
    ("doing a maths degree", "school"), ("on crutches for a month", "health"),
    ("fave film = Alien", "favorite:film"), ("my go-to podcast is Serial", "favorite:podcast")])
def test_the_registry_covers_the_body_habits_money_devices_and_households(text, relation):
    assert relation in km.belief_relations(text)


@pytest.mark.parametrize("text, not_relation", [
    ("I take the tram into work", "employer"), ("I work from home on tuesdays", "employer"),
    ("I drive to the office most days", "vehicle"), ("I work monday to thursday", "employer"),
    ("the hospital has moved me to the day shift; I've been moved to ward 9", "residence"),
    ("watched Home Alone again, and Big Little Lies", "residence"), ("the old kindle lives in a drawer", "residence"),
    ("mum is on a blood pressure tablet", "computer"), ("i'm seeing a physio called Dan", "partner"),
    ("got a dentist appointment on monday", "dentist"), ("hosting a quiz night friday", "hosting"),
    ("our church is doing a jumble sale", "faith"), ("had my hair cut for the wedding", "hair"),
    ("we rent a van for the move", "residence")])
def test_words_that_look_like_a_relation_and_are_not(text, not_relation):
    assert not_relation not in km.belief_relations(text)


def test_a_relation_query_never_searches_by_the_words_a_pattern_excludes():
    assert "insurance" not in km._RELATION_QUERY["vehicle"].split()
    assert {"into", "remotely", "home"}.isdisjoint(km._RELATION_QUERY["employer"].split())
    assert "job" in km.query_expansions("where does Ann work?")


@pytest.mark.parametrize("old, new", [
    ("i weigh about 95kg", "down to 88kg, the running is working"),
    ("my salary is 30k", "pay rise came through, salary is 36k from june"),
    ("I use safari on everything", "firefox user now, safari kept crashing"),
    ("im on about 15 cigarettes a day", "i quit smoking, 3 weeks smoke free"),
])
def test_lower_case_chat_corrections_revise_the_belief(memory, old, new):
    first = said(memory, old)
    assert item_of(said(memory, new)) == item_of(first)


def test_a_relatives_belief_is_not_the_speakers_though_its_words_name_the_speaker(memory):
    nursery = said(memory, "my eldest, Tomas, goes to Oak Tree nursery")
    said(memory, "tomas moved to the nursery by my office, Bluebells")
    mine = said(memory, "moved to a new flat in Didsbury")
    assert item_of(mine) != item_of(nursery)


def test_an_old_value_named_again_outweighs_a_kind_learned_from_the_store(memory):
    said(memory, "I support Leeds United, got a season ticket")
    said(memory, "gave up the season ticket, switched to watching Bradford")
    cello = said(memory, "I'm learning the cello")
    assert item_of(said(memory, "gave up on the cello, doing piano lessons since october")) == item_of(cello)


def test_generic_words_give_a_statement_no_kind_of_value(memory):
    partner = said(memory, "my boyfriend is called Leo")
    said(memory, "leo and i split up. seeing someone called Kai now, early days")
    assert item_of(said(memory, "collected the kids from school early today")) != item_of(partner)


def test_someone_elses_contraction_is_someone_else():
    assert km._OTHER_PERSON.search("jo moved back, she's renting in hull")
    assert not km.Memory._speakers_own("jo moved back, she's renting in hull", ANN)
    assert km.Memory._speakers_own("down to 70kg now", ANN)


def test_what_a_word_of_change_holds_is_what_changed():
    assert km.change_distances("it knocked the big sleep off the top spot")["sleep"] == 0
    assert "sleep" in km.echo_anchors("it knocked the big sleep off the top spot")


@pytest.mark.parametrize("text, resolved", [
    ("fave film = Alien", "Ann's fave film = Alien"), ("bumped up to plot 9", "Ann bumped up to plot 9"),
    ("Fred moved to Leeds", "Fred moved to Leeds")])
def test_a_users_message_opening_with_a_favourite_or_a_past_tense_is_the_speakers(text, resolved):
    assert km.resolved_statement(text, ANN) == resolved


def test_a_value_named_in_the_compared_belief_only_gives_no_kind(memory):
    book = said(memory, "favourite book is The Long Goodbye")
    podcast = said(memory, "the podcast I put on every night is goodbye to all that")
    assert item_of(podcast) != item_of(book)


# A hostile review of round 6's rules: what must stay apart (each pair was merged by a draft of them).
HOSTILE_APART = [
    ("I live in Leeds", "sam moved to york 2 weeks ago"), ("I weigh 70kg", "sam weighs 90kg now"),
    ("my salary is 40k", "jess got a pay rise to 50k"), ("I work at Tesco", "priya works at aldi now, 3 days a week"),
    ("my insurance is with aviva", "any insurance tips for 2025?"), ("I weigh 70kg", "the parcel weighs 2kg"),
    ("my insurance is with aviva", "never had an insurance claim in 10 years"),
    ("I weigh 70kg", "bought 5kg of potatoes"),
    ("I weigh 70kg", "my luggage allowance is 23kg"), ("I'm teetotal", "bought alcohol gel, 2 bottles"),
    ("I use firefox", "dev team switched to chrome last week"), ("switched to safari", "going on safari in kenya"),
    ("my gp is dr patel", "dr who season 2 is great"), ("I rent a flat in Leeds", "renting a car for 3 days in spain"),
    ("I wear glasses now", "bought 6 wine glasses"), ("I drink 2 lattes a day", "the coffee table arrived, 40kg"),
    ("my favourite film is Heat", "favourite film of my dad is Jaws"),
    ("my cat is called Tom", "fave cat breed = siamese"),
    ("I live in Leeds", "world war i veterans lived in care homes"),
    ("my salary is 40k", "for i in salaries: salary += 5k"),
    ("I weigh 70kg", "what should I weigh at 5ft 6?"), ("I use firefox", "> switched to chrome last week"),
]


@pytest.mark.parametrize("old, new", HOSTILE_APART, ids=[pair[1] for pair in HOSTILE_APART])
def test_hostile_look_alikes_never_merge(old, new):
    memory = km.Memory(None)
    first = said(memory, old)
    assert item_of(said(memory, new)) != item_of(first)
    memory.close()


@pytest.mark.parametrize("old, new, merges", [
    ("My laptop is a ThinkPad", "need to update my laptop tonight", False),
    ("I use vim for editing code", "I should switch to emacs at some point", False),
    ("I live in Leeds", "thinking of moving to york next year", False),
    ("I live in Leeds", "moved to york last month", True),
    ("my laptop is a dell", "work gave me a macbook, the dell is retired", True),
    ("we've got sky broadband", "our broadband went down for 2 hours last night", False),
    ("we've got sky broadband", "we're on BT broadband now, sky was useless", True),
])
def test_what_a_speaker_means_to_do_revises_nothing_what_they_did_does(old, new, merges):
    """Needing, wanting or meaning to change something is not a change (``_INTENT``), nor is a message that
    names the relation and no new value (a duration is none: ``_DURATION_SPAN``)."""
    memory = km.Memory(None)
    first = said(memory, old)
    assert (item_of(said(memory, new)) == item_of(first)) is merges
    memory.close()


@pytest.mark.parametrize("text", ["i.e. the cat", "Part i of the book", "i) buy milk", "x[i] = 1",
                                  "http://example.com/i/im/ive", "Jan i Anna mieszkają w Krakowie"])
def test_a_lower_case_i_that_is_not_the_speaker_is_left_as_written(text):
    assert km.resolved_statement(text, ANN) == text


def test_chat_typing_is_read_only_in_a_users_message():
    assert km.resolved_statement("im not sure, i think so", {"role": "assistant", "speaker": "Ava"}) == \
        "im not sure, i think so"
    assert km.resolved_statement("i live in leeds", None) == "i live in leeds"
    assert km.resolved_statement("i live in leeds", ANN) == "Ann live in leeds"


# -- round 7: words that name a relation only in some company ---------------------------------------------

def _same_item(memory: km.Memory, first: str, second: str, *before: str) -> bool:
    for text in before:
        said(memory, text)
    return item_of(said(memory, first)) == item_of(said(memory, second))


@pytest.mark.parametrize("text, relations", [
    ("Ann moved to asics trainers, knees are happier", frozenset()),          # shoes, not a home
    ("Ann moved to wednesdays for the bins", frozenset()),                     # a day, not a home
    ("Ann moved over to bitwarden after the hack", frozenset({"password manager"})),
    ("Ann moved to Aberdeen in the spring", frozenset({"residence"})),
    ("ann moved to dundee last month", frozenset({"residence"})),
    ("Ann moved to the countryside", frozenset({"residence"})),
    ("dr singh retired so Ann has been moved to Dr Adeyemi", frozenset()),    # the doctor's retirement
    ("Ann retired in March", frozenset({"role"})),
])
def test_a_move_or_a_retirement_names_a_relation_only_of_the_right_thing(text, relations):
    assert km.belief_relations(text) == relations


def test_a_move_to_something_that_is_no_place_leaves_the_home_alone():
    with km.Memory(None) as memory:
        assert not _same_item(memory, "I live in Dundee.", "moved to asics trainers, my knees are happier")


def test_a_move_of_tool_revises_the_tool_not_the_home():
    with km.Memory(None) as memory:
        said(memory, "I live in Dundee.")
        assert _same_item(memory, "I keep my passwords in lastpass", "moved over to bitwarden after the hack")


def test_someone_elses_retirement_revises_the_belief_that_names_them():
    with km.Memory(None) as memory:
        said(memory, "I'm a paramedic")
        gp = said(memory, "My GP is Dr Singh.")
        assert item_of(said(memory, "dr singh retired so I've been moved to Dr Adeyemi")) == item_of(gp)


@pytest.mark.parametrize("old, new", [
    ("my mobile provider is Vodafone", "ported my number to lebara, way cheaper"),
    ("We have BT broadband.", "full fibre is in at last, we're with Hyperoptic, 500 meg now"),
    ("my meds are 20mg fluoxetine", "on sertraline now, fewer side effects"),
    ("I'm a junior designer", "got a promotion, the title on my contract is now Lead Designer"),
])
def test_relation_words_of_what_people_switch(old, new):
    with km.Memory(None) as memory:
        assert _same_item(memory, old, new, "I live in Dundee.", "my sister is a nurse")


def test_of_two_beliefs_sharing_a_relation_the_one_whose_value_is_gone():
    with km.Memory(None) as memory:
        said(memory, "I sprained my wrist playing squash")
        assert _same_item(memory, "I wear contact lenses", "had laser surgery done, no more contact lenses!")


def test_we_and_i_are_one_subject_when_the_old_value_is_named_again():
    with km.Memory(None) as memory:
        assert _same_item(memory, "I've got a hamster called Nibbles",
                          "nibbles died last week :( we got a rabbit called Clover")


def test_we_and_i_stay_apart_by_relation_alone():
    with km.Memory(None) as memory:
        assert not _same_item(memory, "we're renting near the harbour", "I moved to Perth last year",
                              "My sister lives in Perth.")


@pytest.mark.parametrize("text, subject", [
    ("Ann's cousins live in Perth", "ann cousin"), ("Ann-group's neighbours got a kitten", "ann group neighbour"),
    ("Ann's eldest, Kai, plays rugby", "ann eldest"), ("Ann's youngest sister is 19", "ann youngest sister")])
def test_plural_relatives_and_the_eldest_child_are_people_of_their_own(text, subject):
    assert km.statement_subject(text) == subject


def test_a_child_named_in_lower_case_is_the_child_the_speaker_introduced():
    with km.Memory(None) as memory:
        said(memory, "I'm doing an evening course at the college")
        assert _same_item(memory, "my eldest, Kai, goes to Greenfield Primary",
                          "kai moved to the academy by the station, Oakwood")


@pytest.mark.parametrize("text, resolved", [
    ("studying for a masters in chemistry", "Ann is studying for a masters in chemistry"),
    ("living in Hull these days", "Ann is living in Hull these days"),
    ("cycling is my favourite sport", "cycling is Ann's favourite sport"),     # the doing is the subject
])
def test_a_message_that_opens_with_what_the_speaker_is_doing_has_left_out_i_am(text, resolved):
    assert km.resolved_statement(text, ANN) == resolved


@pytest.mark.parametrize("text, owner", [
    ("boss put me on the night rota", "self"), ("landlord gave us notice", "self"),
    ("grandma moved into a care home", "kin:grandmother"), ("my uncle rang me, he's off to Spain", "kin:uncle"),
    ("dad called me, he's selling the caravan", "kin:father")])
def test_a_bare_relative_that_acts_on_the_speaker_states_the_speakers_fact(text, owner):
    assert km.chat_owner(text) == owner


def test_how_long_may_open_a_speakers_own_change():
    assert km.Memory._speakers_own("three weeks alcohol free now", ANN)
    assert not km.Memory._speakers_own("three weeks of rain, the broadband keeps dropping", ANN)


def test_a_visit_moved_to_another_day_revises_the_day():
    with km.Memory(None) as memory:
        said(memory, "I have pottery class on tuesdays")
        assert _same_item(memory, "our window cleaner comes on fridays", "window cleaner switched us to mondays")


def test_a_move_to_the_same_day_of_something_else_is_no_revision():
    with km.Memory(None) as memory:
        said(memory, "our window cleaner comes on fridays")
        assert not _same_item(memory, "I have pottery class on tuesdays", "my book club moved to tuesdays")


def test_a_birthday_revises_an_age_stated_bare():
    with km.Memory(None) as memory:
        said(memory, "I work at the library")
        assert _same_item(memory, "I'm 41", "celebrated my 42nd with a curry last night")


def test_a_childs_nursery_is_not_what_the_speaker_studies():
    with km.Memory(None) as memory:
        assert not _same_item(memory, "studying a law degree at the OU", "took the twins to nursery this morning")


def test_a_sibling_named_in_lower_case_is_the_sibling_the_speaker_introduced():
    with km.Memory(None) as memory:
        said(memory, "I live in Swansea")
        assert _same_item(memory, "my brother owen lives in sydney", "owen moved home, he's renting in cardiff")


def test_a_message_a_noun_phrase_opens_is_still_the_speakers():
    assert km.statement_subject(km.resolved_statement("the restructure put me in the claims team", ANN)) == "ann"


@pytest.mark.parametrize("old, new", [
    ("I'm on the onboarding team", "the restructure put me into the claims team"),
    ("I take the bus to work", "bought a bike, walking in most days now"),
])
def test_team_and_commute_said_in_passing(old, new):
    with km.Memory(None) as memory:
        assert _same_item(memory, old, new, "I live in Swansea", "my brother owen works in a bank")


def test_facts_about_the_partner_are_the_partners_own_beliefs():
    assert km.subject_relations("Ann's husband drives a van") == frozenset({"vehicle"})
    assert km.subject_relations("Ann's husband is called Tom") == frozenset({"partner"})
    with km.Memory(None) as memory:
        krefs = [item_of(said(memory, text)) for text in (
            "my husband drives a van", "my husband got a new job at the port", "my husband's favourite food is curry")]
        assert len(set(krefs)) == 3


@pytest.mark.parametrize("text, relation", [
    ("my favourite thing to eat is pho", "favorite:food"),
    ("new rota, up at 4:45 most days", "wake"),
])
def test_a_favourite_said_as_a_thing_to_eat_and_a_wake_time_said_as_up_at(text, relation):
    assert relation in km.belief_relations(text)


def test_up_at_a_number_that_is_no_time_of_waking():
    for text in ("we turned up at 7 and the place was shut", "sales are up by 5 this week"):
        assert "wake" not in km.belief_relations(text)


def test_a_new_favourite_thing_to_eat_revises_the_favourite_food():
    with km.Memory(None) as memory:
        assert _same_item(memory, "my favourite food is paella", "tbh my favourite thing to eat lately is dumplings",
                          "I live in Swansea", "my brother owen works in a bank")


# Found by a hostile review of rules proposed in round 9 (and so not taken): each second statement adds to the
# first or says something else of the same topic, and must stay a belief of its own.
@pytest.mark.parametrize("old, new", [
    ("I drive a Honda Civic.", "I drive a Tesla too but only at weekends."),
    ("I use Firefox as my browser.", "I use Chrome too for testing sites."),
    ("I wfh on Fridays.", "My wifi keeps dropping when I wfh."),
    ("I work from home three days a week.", "I'm in the office on Mondays for the team standup."),
    ("I'm vegetarian.", "I'll eat anything with chocolate in it."),
    ("I'm pescatarian.", "My gluten free bread recipe finally worked."),
    ("I take the bus to work.", "I catch the train every Christmas to my parents."),
])
def test_an_added_value_or_another_fact_of_the_topic_is_no_correction(old, new):
    with km.Memory(None) as memory:
        assert not _same_item(memory, old, new, "I live in Swansea")


# -- 6. recall finds a later correction the question's words miss (loose echo) -----------------------------

def test_the_value_of_a_possessed_attribute_and_short_names_in_ly_are_anchors():
    assert "sarah" in km.echo_anchors("my manager is sarah, she's great")
    assert "lili" in km.echo_anchors("My daughter Lily is four")          # a name, not an adverb
    assert not {"quickli", "mostli"} & km.echo_anchors("I mostly cycle, it's quickly done")


def test_a_loose_echo_needs_a_word_of_change_a_short_message_and_one_owner():
    old = "i shop at tesco for the big weekly shop"
    new = "tesco's prices got silly so we do it at aldi instead"
    assert km.echo_ties(old, new) == frozenset()                            # "instead" is far from "tesco"
    assert "tesco" in km.echo_ties(old, new, loose=True)
    assert km.echo_ties(old, "tesco's prices got silly", loose=True) == frozenset()     # no word of change
    long = new + " " + "and that is all there is to say about the shopping this week, honestly. " * 5
    assert len(long) > km.ECHO_LOOSE_CHARS and km.echo_ties(old, long, loose=True) == frozenset()
    assert km.echo_ties(old, "my sister's moved from tesco to aldi", loose=True) == frozenset()   # hers


def _shopping(memory: km.Memory) -> tuple[str, str]:
    for text in ("walked the dog in the rain", "the boiler is making a noise again", "my sister shops at lidl"):
        said(memory, text)
    old = said(memory, "i shop at tesco for the big weekly shop")
    said(memory, "made a curry for tea")
    new = said(memory, "tesco's prices got silly so we do it at aldi instead")
    return old, new


def test_recall_finds_a_later_message_that_names_the_answer_again_with_a_word_of_change():
    memory = km.Memory(None, clock=km.ManualClock("2026-01-01T00:00:00Z", tick=60), ids=km.SequentialIds())
    old, new = _shopping(memory)
    assert item_of(old) != item_of(new)                     # not merged: the rules could not tell
    found = memory.recall("Where do I shop?", space=SPACE, limit=5)
    order = [result["kref"] for result in found]
    assert new in order and order.index(new) < order.index(old)
    newer, older = found[order.index(new)], found[order.index(old)]
    assert older["signals"]["superseded_by"] == new and old in newer["signals"]["supersedes"]
    assert [result["score"] for result in found] == sorted((result["score"] for result in found), reverse=True)



CHATTER = ["walked the dog in the rain", "the boiler is making a noise again", "my sister shops at lidl",
           "the dog chewed my slipper", "train was late again this morning", "made a massive lasagne for the week",
           "work was manic today", "finally fixed the leaky tap", "watched the football with dad",
           "need to book the car in for a service", "the neighbours are having a party lol",
           "forgot my umbrella, soaked"]


def _amid_chatter(memory: km.Memory, old: str, new: str) -> tuple[str, str]:
    """``old`` said amid a day's chatter, then ``new``: their krefs."""
    for text in CHATTER[:6]:
        said(memory, text)
    first = said(memory, old)
    for text in CHATTER[6:]:
        said(memory, text)
    return first, said(memory, new)


def test_recall_finds_the_later_message_the_question_words_miss_by_the_found_ones_value():
    memory = km.Memory(None, clock=km.ManualClock("2026-01-01T00:00:00Z", tick=60), ids=km.SequentialIds())
    # (a bank KNOWN_VALUES does not name: the question's words find the later message only by the echo)
    old, new = _amid_chatter(memory, "i bank with nationwide",
                             "moved everything over to triodos, nationwide kept freezing my card")
    assert item_of(old) != item_of(new)
    found = memory.recall("Where do I bank?", space=SPACE, limit=5)
    assert [result["kref"] for result in found][:2] == [new, old]
    assert found[0]["signals"]["echoes"] == old and found[0]["signals"]["supersedes"] == [old]
    assert found[1]["signals"]["superseded_by"] == new
    plain = memory.recall("nationwide card", space=SPACE, limit=5)   # no question about the user: no reordering
    assert not any("echoes" in (result.get("signals") or {}) for result in plain)


def test_a_question_about_the_past_a_filter_or_another_speaker_finds_no_later_correction():
    memory = km.Memory(None, clock=km.ManualClock("2026-01-01T00:00:00Z", tick=60), ids=km.SequentialIds())
    old, new = _shopping(memory)
    for question, options in (("Where did I shop before?", {}),
                              ("Where do I shop?", {"where": {"user_id": "ann"}}),
                              ("Where do I shop?", {"include_superseded": True})):
        found = memory.recall(question, space=SPACE, limit=5, **options)
        assert not any((result.get("signals") or {}).get("echoes") for result in found), (question, options)
    bob = km.Memory(None, clock=km.ManualClock("2026-01-01T00:00:00Z", tick=60), ids=km.SequentialIds())
    said(bob, "i shop at tesco for the big weekly shop")
    said(bob, "tesco's prices got silly so we do it at aldi instead", {"speaker": "user", "user_id": "bob"})
    said(bob, "tesco's prices got silly so we do it at aldi instead", {"speaker": "assistant"})
    found = bob.recall("Where do I shop?", space=SPACE, limit=5)
    assert [result["content"] for result in found][0] == "i shop at tesco for the big weekly shop"
    assert not any((result.get("signals") or {}).get("echoes") for result in found)


# -- a person's belief is found by its earlier statements' words ----------------------------------------------

def _hairdresser(memory: km.Memory) -> tuple[str, str]:
    return _amid_chatter(memory, "my hairdresser is called jodie", "jodie's retired so it's a new salon for me now")


def test_a_belief_revised_in_other_words_is_found_by_the_words_it_was_first_said_in():
    memory = km.Memory(None, clock=km.ManualClock("2026-01-01T00:00:00Z", tick=60), ids=km.SequentialIds())
    old, new = _hairdresser(memory)
    assert item_of(old) == item_of(new) and new.endswith("?r=2")       # merged: "jodie" named again
    found = memory.recall("Who is my hairdresser?", space=SPACE, limit=5)
    assert found[0]["kref"] == new and found[0]["signals"]["earlier_match"] == old
    assert old not in [result["kref"] for result in found]           # the current revision comes back, alone
    assert 0 < found[0]["base_score"] <= 1.0
    # without it the words of the current revision alone decide, as they do for a past moment or a history
    assert new not in [r["kref"] for r in memory.recall("Who is my hairdresser?", space=SPACE, follow_edges=False)]
    history = memory.recall("Who is my hairdresser?", space=SPACE, include_superseded=True)
    assert history[0]["kref"] == old and "earlier_match" not in history[0]["signals"]


def test_a_revised_note_without_a_speaker_is_found_by_its_current_words_alone():
    memory = km.Memory(None, clock=km.ManualClock("2026-01-01T00:00:00Z", tick=60), ids=km.SequentialIds())
    first = memory.remember("the hairdresser on the corner is called jodie", space=SPACE)
    memory.remember("the salon on the corner closed", space=SPACE, item=item_of(first))
    assert memory.recall("hairdresser", space=SPACE) == []


def test_a_forgotten_earlier_statement_finds_nothing_again():
    memory = km.Memory(None, clock=km.ManualClock("2026-01-01T00:00:00Z", tick=60), ids=km.SequentialIds())
    old, new = _hairdresser(memory)
    memory.forget(old)
    assert new not in [result["kref"] for result in memory.recall("Who is my hairdresser?", space=SPACE)]


def test_the_earlier_words_lend_the_same_after_a_reopen(tmp_path):
    path = str(tmp_path / "store.db")
    with km.Memory(path, clock=km.ManualClock("2026-01-01T00:00:00Z", tick=60)) as memory:
        old, new = _hairdresser(memory)
        here = [(r["kref"], r["score"]) for r in memory.recall("Who is my hairdresser?", space=SPACE)]
        memory.backend.warm_recall_index()
    with km.Memory(path) as reopened:
        assert [(r["kref"], r["score"]) for r in reopened.recall("Who is my hairdresser?", space=SPACE)] == here
    assert here[0][0] == new


def test_chat_filler_ties_no_two_messages():
    assert not {"lol", "tbh", "call"} & km.echo_anchors("remembered my tablets for once lol, tbh a cat called")
    assert km.echo_ties("remembered to take my tablets for once lol",
                        "no longer driving in, the commute is the hallway lol", loose=True) == frozenset()


def test_another_speakers_earlier_words_lend_nothing():
    memory = km.Memory(None, clock=km.ManualClock("2026-01-01T00:00:00Z", tick=60), ids=km.SequentialIds())
    old, _ = _hairdresser(memory)
    bob = memory.remember("the salon by the station is nice", space=SPACE, item=item_of(old),
                          metadata={"speaker": "user", "user_id": "bob"})
    assert bob not in [result["kref"] for result in memory.recall("Who is my hairdresser?", space=SPACE)]


def test_a_published_revision_borrows_no_words_from_a_newer_draft():
    memory = km.Memory(None, clock=km.ManualClock("2026-01-01T00:00:00Z", tick=60), ids=km.SequentialIds())
    old, new = _hairdresser(memory)
    memory.tag(old, km.PUBLISHED_TAG)                    # the first statement stays the one served
    found = memory.recall("Who is my hairdresser?", space=SPACE, limit=5)
    assert found[0]["kref"] == old and "earlier_match" not in found[0]["signals"]
    drafted = memory.recall("retired salon", space=SPACE, limit=5)  # the draft's words lend the published nothing
    assert not any("earlier_match" in result["signals"] for result in drafted)
    assert new not in [result["kref"] for result in drafted]


def test_the_earlier_revisions_are_worked_out_again_after_a_change():
    memory = km.Memory(None, clock=km.ManualClock("2026-01-01T00:00:00Z", tick=60), ids=km.SequentialIds())
    first = said(memory, "my dentist is called priya")
    assert memory.recall("Who is my dentist?", space=SPACE)[0]["kref"] == first   # nothing revised yet
    second = said(memory, "priya moved away so it's someone new for my teeth now")
    assert item_of(second) == item_of(first)
    found = memory.recall("Who is my dentist?", space=SPACE)
    assert found[0]["kref"] == second and found[0]["signals"]["earlier_match"] == first


@pytest.mark.parametrize("question, current", [
    ("Where do I live now?", True), ("where do I live\nbefore the move?", False),
    ("what is my car\nthe first one", False), ("Which gym do I go to these days?", True)])
def test_a_question_about_now_is_read_whole(question, current):
    assert (km._CURRENT_QUESTION.search(question) is not None) == current


# -- well-known values, a speaker's "we", a correction on the question's topic (issue 16, items 1, 4 and 6) --

def _chat() -> km.Memory:
    return km.Memory(None, clock=km.ManualClock("2026-01-01T00:00:00Z", tick=60), ids=km.SequentialIds())


@pytest.mark.parametrize("text, relations", [
    ("picked up a used Skoda last week", {"vehicle"}), ("switched to a Pixel", {"handset"}),
    ("we're with Hyperoptic now", {"internet"}), ("most of my day is Kotlin", {"code language"}),
    ("I write Kotlin on my Pixel", set()),                 # values of two relations: neither
    ("the golf club has a new bar", set()),                # a brand that is also a common word is no value
    ("I take sertraline", set())])                         # medicines: one takes several at once
def test_a_well_known_value_names_its_relation(text, relations):
    assert set(km.known_value_relations(text)) == relations
    assert km.belief_relations(text) == frozenset()        # a value alone names no relation


@pytest.mark.parametrize("text, relations", [
    ("sold the civic, I'm in a tesla now", {"vehicle"}), ("switched banks to monzo", {"bank"}),
    ("ported everything to kotlin last month", {"code language"}),
    ("saw a porsche outside the office today, new plates", set()),     # a value only seen
    ("work gave me a new android for on-call", set()),                 # given, not changed to
    ("used to be with hsbc years ago", set()),                         # past
    ("iphone 15 just came out, not switching though", set()),          # denied
    ("going to switch to firefox next month", set()),                  # planned
    ("switched to firefox, and I use chrome too", set()),              # added
    ("my mate switched his bmw for a tesla", set())])                  # another person's
def test_only_a_change_to_a_well_known_value_states_its_relation(text, relations):
    assert set(km.known_value_change(text)) == relations


def test_a_correction_by_a_well_known_value_revises_the_belief_it_replaces():
    memory = _chat()
    first = said(memory, "Most of what I write at work is Scala.")
    said(memory, "I am allergic to cats")
    said(memory, "I use a ThinkPad at home")
    assert item_of(said(memory, "I ported the whole backend to Kotlin, so that's what I write now")) == item_of(first)
    laptop = said(memory, "I use a ThinkPad at home")
    assert item_of(said(memory, "I also run Python scripts at weekends")) != item_of(first)   # one more: kept
    assert item_of(laptop) != item_of(first)


def test_a_well_known_value_without_a_word_of_change_or_with_one_that_adds_is_a_new_belief():
    memory = _chat()
    car = said(memory, "I drive a Honda Civic.")
    for text in ("I bought a Tesla.", "I got a Tesla too, for the long trips"):
        assert item_of(said(memory, text)) != item_of(car), text
    assert km.belief_relations("he's driving mum mad already") == frozenset()   # not a car


def test_a_speakers_we_and_i_are_one_subject_for_a_correction_of_the_same_relation():
    memory = _chat()
    java = said(memory, "At work we build everything in Java.")
    assert item_of(said(memory, "I switched to Kotlin for the new services")) == item_of(java)
    trips = _chat()                                          # but not a couple's trip for one's own
    lisbon = said(trips, "I'm flying to Lisbon on 14 June.")
    assert item_of(said(trips, "Our honeymoon is going to be in Bali.")) != item_of(lisbon)
    homes = _chat()                                          # and "we" for "we" before "we" for "I"
    said(homes, "I grew up in Leeds.")
    ours = said(homes, "we live in Chapel Allerton")
    assert item_of(said(homes, "we've moved across town to Roundhay")) == item_of(ours)


def test_a_well_known_value_is_found_by_the_words_a_question_asks_by():
    memory = _chat()
    for text in CHATTER:
        said(memory, text)
    tesla = said(memory, "I got a Tesla last week")
    assert memory.recall("What car do I drive?", space=SPACE, limit=3)[0]["kref"] == tesla


def test_a_later_correction_on_the_questions_topic_ranks_above_what_it_corrects():
    memory = _chat()
    said(memory, "lunch was great")
    old = said(memory, "our standup is at 9 every morning")
    # filed without stacking: two memories that recall orders (stacked, the correction revises it: below)
    new = memory.remember("standup's at 9:30 for us from now on, the New York office asked", space=SPACE,
                          metadata=dict(ANN))
    assert item_of(old) != item_of(new)
    found = memory.recall("When is my standup?", space=SPACE, limit=3)
    assert [result["kref"] for result in found][:2] == [new, old]
    assert found[0]["signals"]["on_topic"] == ["standup"] and found[1]["signals"]["superseded_by"] == new
    past = memory.recall("When was my standup before?", space=SPACE, limit=3)    # a question about the past
    assert not any("on_topic" in (result.get("signals") or {}) for result in past)


def test_a_correction_that_names_the_words_of_two_results_moves_above_neither():
    memory = _chat()
    said(memory, "our standup is at 9 every morning")
    said(memory, "I like the standup comedy club on Fridays")
    said(memory, "standup's at 9:30 for us from now on, the New York office asked")
    found = memory.recall("When is my standup?", space=SPACE, limit=3)
    assert len(found) == 3 and not any("on_topic" in (result.get("signals") or {}) for result in found)


# 0.8.7: more ways of saying a relation (banks, mobile networks, the language one learns, a coffee order, a "top"
# or "number one" favourite, a favourite said value first); pairs in our own words, each missed by 0.8.6
@pytest.mark.parametrize("old, new", [
    ("I bank with Lloyds.", "moved all my accounts over to Starling last month"),
    ("I bank with Barclays.", "closed my barclays account, my pay goes straight into monzo these days"),
    ("My phone plan is with Vodafone.", "My mobile carrier these days is Lebara, Vodafone got too pricey."),
    ("I'm learning Italian.", "I've switched to studying Greek."),
    ("I'm learning Italian.", "gave up on italian, doing greek now"),       # the language stays a value word
    ("My favourite film is Alien.", "Arrival is my all-time top film now."),
    ("Adele is my favourite singer.", "my top artist at the moment is Hozier"),
    ("My usual coffee is a latte.", "these days I just order a cortado")])
def test_more_ways_of_saying_a_relation_are_corrections(old, new):
    memory = _chat()
    first = said(memory, old)
    assert item_of(said(memory, new)) == item_of(first)


# ... and their look-alikes, most from a hostile review of the first cut: another account, a job at a bank, a pet
# carrier, a language studied once or as a subject, a test tool, a ranking, another's favourite, a name that opens a
# message, a change with an aside of intent
@pytest.mark.parametrize("old, new", [
    ("I bank with Lloyds.", "I volunteer at the food bank on Sundays now"),
    ("I bank with Lloyds.", "I closed my Twitter account last week"),
    ("I bank with Lloyds.", "I closed my gmail account, too much spam"),
    ("I bank with Lloyds.", "I switched my Netflix account to the basic plan"),
    ("I bank with Lloyds.", "I'm an analyst at the World Bank now"),
    ("I bank with Lloyds.", "I sat at the bank of the river all afternoon"),
    ("My phone plan is with Vodafone.", "I bought a new pet carrier for the cat"),
    ("My phone plan is with Vodafone.", "I'm on the mobile app team now"),
    ("My favourite film is Alien.", "we live on the top floor now"),
    ("I'm learning Italian.", "my sister is learning Greek now"),
    ("I'm learning Italian.", "I studied French at university"),
    ("I'm learning Italian.", "I'm studying Chinese history this term"),
    ("I'm learning Italian.", "I'm helping my husband practise Japanese"),
    ("My usual coffee is a latte.", "I moved our tests from Jest to Mocha"),
    ("My usual coffee is a latte.", "I painted my bedroom mocha brown"),
    ("My favourite film is Alien.", "my top priority is sleep these days"),
    ("My favourite food is pizza.", "my top food allergy is peanuts"),
    ("My favourite film is Alien.", "Dune is my top film of 2024"),
    ("My favourite film is Alien.", "my number one film to avoid is Cats"),
    ("My favourite film is Alien.", "Dune is my sister's favourite film"),
    ("I work at Deloitte.", "Will left deloitte, started at KPMG"),
    ("I live in Bristol.", "Will moved out of Bristol to Leeds"),
    ("I work at Deloitte.", "Jared off to KPMG, left deloitte friday"),
    ("I go running three times a week.", "Alfred in the pool now instead of running")])
def test_look_alikes_of_the_new_ways_of_saying_a_relation_stay_apart(old, new):
    memory = _chat()
    first = said(memory, old)
    assert item_of(said(memory, new)) != item_of(first)


@pytest.mark.parametrize("text, relations", [
    ("we live on the top floor", {"residence"}), ("my top priority is sleep", set()),
    ("top band of the year", set()), ("My top artist right now is SZA.", {"favorite:music"}),
    ("I help out at the food bank", set()), ("everything's at Harbor Bank now", set()),
    ("I'm learning Polish notation", set()), ("I learnt Greek at school", set())])
def test_top_and_bank_name_a_relation_only_as_a_person_says_it(text, relations):
    assert km.belief_relations(text) == relations


def test_a_favourite_said_value_first_is_about_whose_favourite_it_is():
    assert km.statement_subject("Radiohead is Nina's favourite band") == "nina"
    assert km.statement_subject("Kendrick Lamar is my favourite musician.", speaker="ann") == "ann"
    assert km.statement_subject("Dune is my sister's favourite film", speaker="ann") == "ann sister"
    assert km.statement_subject("Ben is Ann's favourite student") == "ben"      # no kind of favourite thing
    assert km.statement_subject("Rex is Nina's favourite dog") == "rex"


@pytest.mark.parametrize("text", [
    "the mazda got written off, picked up a used skoda, you should see it",
    "the mazda got written off, I have to say the skoda I picked up is nicer"])
def test_an_aside_of_intent_does_not_undo_a_change_named_by_its_old_value(text):
    memory = _chat()
    first = said(memory, "I drive a Mazda 3.")
    assert item_of(said(memory, text)) == item_of(first)


# 0.8.7: a later message of the speaker's own that shares no word with what it corrects, but answers the same
# question and tells of a change in the singular, ranks above it (pairs like the blind sets', in our words).
@pytest.mark.parametrize("fact, later, question", [
    ("I go running three times a week.", "my knees gave up so I swim laps at the pool instead",
     "What exercise do I do?"),
    ("My favourite podcast is Radiolab.", "I switched to listening to Hardcore History every commute",
     "What podcast do I listen to?"),
    # 0.8.9: for a question about a well-known value ("what car do I have?"), a later message of the speaker's own
    # that names another value of that kind, holding now, with no word of change
    ("My car is a blue Ford Focus.", "finally picked up a Kia Sportage after the old one kept failing",
     "What car do I have?"),
    ("I wear a Fitbit Versa.", "the whoop strap tracks my sleep so much better", "What watch do I wear?"),
    ("My energy supplier is Bulb.", "got the welcome pack, we're with OVO since the first",
     "Who is my energy supplier?"),
    ("I do my tasks in Todoist.", "we all live in ClickUp and honestly it's fine", "What task tool do I use?")])
def test_a_later_change_that_answers_the_same_question_ranks_above_it(fact, later, question):
    memory = _chat()
    old = memory.remember(fact, space=SPACE, metadata=dict(ANN))
    new = memory.remember(later, space=SPACE, metadata=dict(ANN))
    found = memory.recall(question, space=SPACE, limit=5)
    assert [result["kref"] for result in found][:2] == [new, old]
    assert found[0]["signals"]["on_topic"] == ["?"] and found[1]["signals"]["superseded_by"] == new


@pytest.mark.parametrize("fact, later, question", [
    ("I go running three times a week.", "we switched the team over to swimming laps instead",      # a "we"
     "What exercise do I do?"),
    ("My favourite podcast is Radiolab.", "we switched to listening to Hardcore History every commute",
     "What podcast do I listen to?"),
    ("I go running three times a week.", "my daughter swims laps at the pool instead now", "What exercise do I do?"),
    ("I go running three times a week.", "my knees gave up so the kids and I swim laps at the pool instead",
     "What exercise do I do?"),
    ("I go running three times a week.", "I also swim laps at the pool now", "What exercise do I do?"),   # adds
    ("I go running three times a week.", "I'm hoping to swim laps at the pool instead", "What exercise do I do?"),
    ("I live in Leeds.", "I've moved over to VS Code, PyCharm was too heavy", "Which city do I live in?"),
    # a hostile review's: a word of the question that names no kind of thing, or another relation
    ("My favourite film is Alien.", "My favourite colour is green now", "What is my favourite film?"),
    ("I work at Google.", "I work out at the gym now, 3 times a week", "Where do I work?"),
    ("I work at Google.", "I switched my desk to the third floor at work", "Where do I work?"),
    ("I work at Google.", "My work trip to Paris got cancelled", "Where do I work?"),
    ("I drive a Mazda 3.", "I switched my car insurance to Aviva", "What car do I drive?")])
def test_a_later_message_that_only_seems_to_answer_the_question_supersedes_nothing(fact, later, question):
    memory = _chat()
    memory.remember(fact, space=SPACE, metadata=dict(ANN))
    memory.remember(later, space=SPACE, metadata=dict(ANN))
    for result in memory.recall(question, space=SPACE, limit=5):
        assert not {"superseded_by", "supersedes", "on_topic"} & set(result.get("signals") or {}), result


def test_a_later_change_ranks_above_nothing_when_it_answers_two_earlier_messages():
    memory = _chat()
    memory.remember("I go running three times a week.", space=SPACE, metadata=dict(ANN))
    memory.remember("I do yoga on Sunday mornings.", space=SPACE, metadata=dict(ANN))
    memory.remember("my knees gave up so I swim laps at the pool instead", space=SPACE, metadata=dict(ANN))
    found = memory.recall("What exercise do I do?", space=SPACE, limit=5)
    assert len(found) == 3 and not any("superseded_by" in (result.get("signals") or {}) for result in found)


def test_an_additional_value_never_supersedes_the_one_it_adds_to():
    memory = _chat()
    drive = said(memory, "I drive a Mazda 3.")
    said(memory, "I also keep an old mazda mx-5 for sunny days")
    found = memory.recall("what car do I drive?", space=SPACE, limit=5)
    mine = next(result for result in found if result["kref"] == drive)
    assert "superseded_by" not in (mine.get("signals") or {})


# A hostile review's look-alikes of this round's rules (a value seen, given, past, planned or another's; a "we"
# that is the kids or the office; news of the same brand; a stand-in for a few days): the later message never
# revises the fact, and the fact stays first and current for the question.
@pytest.mark.parametrize("fact, later, question", [
    ("I drive a BMW 3 series.", "saw a porsche outside the office today, new plates", "What car do I drive?"),
    ("I use Santander.", "used to be with hsbc years ago", "Who do I bank with?"),
    ("I use an iPhone 13.", "work gave me a new android for on-call", "What phone do I have?"),
    ("I drive a Kia Niro.", "next door just got a new tesla", "What car do I drive?"),
    ("I use Chrome.", "we switched the kids' tablets to firefox", "What browser do I use?"),
    ("I use Vim.", "we switched the students to vscode this term", "What editor do I use?"),
    ("I drive an Audi A4.", "we finally sold grandad's old volvo now he's stopped driving", "What car do I drive?"),
    ("My phone is an iPhone 13.", "iphone 15 just came out, not upgrading though", "What phone do I have?"),
    ("I use Vim.", "vim 9 changed the scripting language", "What editor do I use?"),
    ("I bank with Lloyds.", "natwest was down all morning, glad I'm not with them", "Who do I bank with?"),
    ("I have a Samsung S21.", "using my old iphone for a few days while the samsung's being repaired",
     "What phone do I have?")])
def test_a_look_alike_of_a_well_known_value_change_revises_nothing(fact, later, question):
    memory = _chat()
    first = said(memory, fact)
    assert item_of(said(memory, later)) != item_of(first)
    found = memory.recall(question, space=SPACE, limit=3)
    assert found[0]["kref"] == first and "superseded_by" not in (found[0].get("signals") or {})


@pytest.mark.parametrize("text, relation", [
    ("I earn £42,000 a year.", "salary"), ("My phone plan is with EE.", "mobile network"),
    ("Our home internet is with Virgin Media.", "internet"), ("I'm officially divorced as of last month", "partner"),
    ("I'm in contacts full-time now", "eyesight")])
def test_the_registry_reads_more_ways_of_stating_a_relation(text, relation):
    assert relation in km.belief_relations(text)


@pytest.mark.parametrize("text", ["the frames just live in a drawer now", "I separated the recycling",
                                  "that old bike still lives in the shed"])
def test_a_thing_kept_somewhere_or_a_chore_names_no_relation_of_the_speaker(text):
    assert not {"residence", "partner"} & km.belief_relations(text)


def test_a_correction_in_the_registrys_new_words_revises_its_belief():
    memory = _chat()
    salary = said(memory, "I earn £42,000 a year.")
    internet = said(memory, "Our home internet is with Virgin Media.")
    assert item_of(said(memory, "The raise came through, I'm on 48k now.")) == item_of(salary)
    assert item_of(said(memory, "Switched broadband to Hyperoptic, half the price.")) == item_of(internet)


@pytest.mark.parametrize("old, new", [
    ("My dog is called Rex.", "We renamed our dog Max."),
    ("My dog is called Rex.", "Our dog is called Max now."),
    ("My car is a Golf.", "We sold our car and bought a Kia."),
    ("My dentist is Dr Lee.", "Our dentist is now Dr Park.")])
def test_our_thing_is_my_thing_when_the_user_corrects_it(old, new):
    memory = _chat()
    first = said(memory, old)
    assert item_of(said(memory, new)) == item_of(first)


@pytest.mark.parametrize("old, new", [
    ("My dog is called Rex.", "Our neighbour's dog is called Max."),
    ("My car is a Golf.", "Our car needs new tyres."),
    ("I use Chrome.", "We switched the kids' tablets to Firefox."),
    ("My dentist is Dr Lee.", "Our kids' dentist is Dr Park.")])
def test_our_other_things_stay_apart_from_mine(old, new):
    memory = _chat()
    first = said(memory, old)
    assert item_of(said(memory, new)) != item_of(first)


# A short message in which the speaker corrects themselves, tied to the one statement of theirs that shares a
# specific word with it, when it gives a value of the kind that statement holds (``Memory._topic_match``)
TOPIC_TIED = [
    ("My partner's name is Sam.", "Sorry, typo earlier, my partner is Sean, not Sam."),
    ("My daughter Emma is six years old.", "Oops, I misspoke earlier, Emma is actually seven."),
    ("I'm heading to Lisbon for a trip in May.", "Change of plans, the May trip is going to Barcelona instead."),
    ("My lunch break is at noon every day.", "Lunch got moved to 1:30 because of the new shift pattern."),
    ("Our weekly team meeting is on Tuesdays at 2pm.", "The weekly meeting has moved to Thursday mornings."),
    ("My dentist is Dr. Patel.", "I changed dentists, I see Dr. Nguyen now."),
]


@pytest.mark.parametrize("old, new", TOPIC_TIED, ids=[pair[1] for pair in TOPIC_TIED])
def test_a_self_correction_is_tied_by_the_topic_it_names(old, new):
    memory = _chat()
    said(memory, "My brother's dentist is Dr. Lee.")
    first = said(memory, old)
    said(memory, "I play squash on Fridays.")
    assert item_of(said(memory, new)) == item_of(first)


TOPIC_APART = [
    ("I weigh 70kg", "sam weighs 90kg now"),                                     # someone else, lower case
    ("my phone's a samsung galaxy s21", "my phone's on 4% and i left my charger at work"),     # no new phone
    ("I bike to the farmers' market on Saturday mornings.",
     "Bought an electric bike last month and honestly I'm never squeezing onto the 42 again."),
    ("favourite book is The Secret History", "new favourite spot is a tiny georgian place called Mimino"),
    ("my favourite book is The Secret History, I reread it every winter",
     "cancelled the villa in the Algarve, we've booked a week in Crete instead, flights are on the 9th"),
    ("I drive a Honda Civic.", "The Civic's insurance is now with Aviva."),          # the value as an owner
    ("My favourite band is Radiohead.", "Radiohead changed their drummer to Clive."),
    ("I live in Bristol, been here since uni",
     "let my Quins membership lapse. it's Bristol Bears at Ashton Gate I go and watch these days"),
    ("My gym is PureGym.", "My sister's gym moved to Tuesdays now."),                 # a relative's
    ("My favourite movie is Inception.", "Turns out Nolan has a new movie out now, Oppenheimer."),
    ("I live on Maple Street, number 42.", "The neighbours at number 44 moved out yesterday."),
    ("We have a team lunch every Friday at noon.", "The Friday lunch place changed, now it's the Thai spot."),
    ("I have a dentist appointment on Thursday at 3pm.",
     "sorry, the car service is Thursday at 4pm, not the dentist"),
]


@pytest.mark.parametrize("old, new", TOPIC_APART, ids=[pair[1] for pair in TOPIC_APART])
def test_a_word_shared_without_a_corrected_value_ties_nothing(old, new):
    memory = _chat()
    first = said(memory, old)
    assert item_of(said(memory, new)) != item_of(first)


def test_two_statements_on_the_topic_leave_a_self_correction_a_new_belief():
    memory = _chat()
    mine = said(memory, "My lunch break is at noon every day.")
    said(memory, "I have lunch with Tom on Fridays.")
    assert item_of(said(memory, "Lunch got moved to 1:30 because of the new shift pattern.")) != item_of(mine)


FILLER = ("I had pasta for dinner.", "The weather is nice today.", "I'm reading a novel.")   # said before a pair


# Look-alikes a hostile reviewer wrote (issue 16, session 16) that used to merge: another thing of the same kind
# named by a qualifier ("the *wine* club"), a thing the old value qualifies ("sushi *place*"), a one-off ("today")
@pytest.mark.parametrize("old, new", [
    ("My phone number ends in 4417.", "the office phone number changed, ends in 9920 now"),
    ("My favourite food is sushi.", "Turns out my favourite sushi place closed, so sad."),
    ("I commute by train, the 7:45 from Newark.", "the 7:45 from Newark was cancelled today, took a bus instead"),
    ("The meeting with the client is on Tuesday at 2pm.",
     "The internal prep meeting got rescheduled to Monday at 4pm."),
    ("We have a book club on the first Thursday of the month.", "the wine club switched to the second Thursday now"),
])
def test_another_thing_of_the_kind_or_a_one_off_is_no_correction(old, new):
    memory = km.Memory(None, clock=km.ManualClock("2026-01-01T00:00:00Z", tick=60), ids=km.SequentialIds())
    for text in FILLER:
        said(memory, text)
    first = said(memory, old)
    assert item_of(said(memory, new)) != item_of(first)


@pytest.mark.parametrize("old, new", [
    ("My daughter Mia is 7.", "Sorry, I got that wrong, Mia is actually 8."),
    ("My flight to London leaves Friday at 6pm.", "The London flight now departs Saturday morning at 8."),
])
def test_a_correction_next_to_the_hostile_look_alikes_still_revises(old, new):
    memory = km.Memory(None, clock=km.ManualClock("2026-01-01T00:00:00Z", tick=60), ids=km.SequentialIds())
    for text in FILLER:
        said(memory, text)
    first = said(memory, old)
    assert item_of(said(memory, new)) == item_of(first)


@pytest.mark.parametrize("old, new", [
    ("I see my mom every Sunday.", "This Sunday I'm seeing my dad instead, mom's traveling."),      # a one-off
    ("We go camping every August.",
     "This year we're going to the beach in July instead, plus camping in August as usual."),    # still holds
    # a past, one more of a kind or a plan, then what holds now (issue 16, session 19)
    ("Back in college I used to ride a Vespa everywhere.", "I ride a Yamaha scooter."),
    ("I rented a tiny studio in Ghent as a student.", "I live in Antwerp."),
    ("When I was a teenager I worked at a bakery.", "I work at a law firm."),
    ("I also keep an old Nokia as a backup phone.", "My phone is a Pixel 7."),
    ("I might learn Emacs at some point.", "My editor is Helix."),
    ("I'm thinking about getting a cat next year.", "I have a parrot called Kiwi."),
])
def test_a_one_off_or_the_old_still_holding_revises_nothing(old, new):
    memory = _chat()
    first = said(memory, old)
    assert item_of(said(memory, new)) != item_of(first)


@pytest.mark.parametrize("old, new", [
    ("our team standup is at 9:30 every morning", "the design team moved their standup to 10am, doesn't affect us"),
    ("I can bench 185 lbs", "my gym buddy Carlos can bench 225 now, show off 💪"),
])
def test_anothers_thing_or_anothers_doing_is_no_self_correction(old, new):
    memory = _chat()
    for text in FILLER:
        said(memory, text)
    first = said(memory, old)
    assert item_of(said(memory, new)) != item_of(first)


@pytest.mark.parametrize("old, new", [
    ("I go to Planet Fitness 3 times a week",
     "planet fitness changed its hours, now closes at 10pm instead of midnight"),
    ("My doctor is Dr. Patel.", "Dr. Patel moved her clinic to Elm Street now."),
    ("I bank with Chase", "chase changed their app layout again, so annoying, took me 10 min to find transfers"),
    ("My landlord is Mr. Chen.", "Mr. Chen changed his phone number, new one is 555-0199."),
])
def test_news_of_the_old_value_acting_on_its_own_is_no_correction(old, new):
    memory = _chat()
    first = said(memory, old)
    assert item_of(said(memory, new)) != item_of(first)


def test_the_old_value_leaving_is_still_a_correction():
    memory = _chat()
    first = said(memory, "my hairdresser is kim")
    assert item_of(said(memory, "kim moved salons and i didn't follow, Lucy at Halo does my hair now")) == \
        item_of(first)


def test_too_before_a_word_is_how_much_not_one_more():
    memory = _chat()
    first = said(memory, "I do most of my programming in PyCharm.")
    assert item_of(said(memory, "I've moved over to VS Code, PyCharm was too heavy.")) == item_of(first)
    cars = _chat()
    mazda = said(cars, "I drive a Mazda 3.")
    assert item_of(said(cars, "I got a tesla too")) != item_of(mazda)


def test_a_favourite_artist_is_a_favourite_band():
    assert km.belief_relations("These days my favourite artist is Billie Eilish.") == \
        km.belief_relations("My favourite band is Radiohead.")


@pytest.mark.parametrize("old, new", [
    ("My home laptop is a Dell XPS 13.", "Gave the XPS to my nephew; I use a Framework 13 at home now."),
    ("We're driving down to Cornwall for the August bank holiday.",
     "Change of plan: Cornwall was fully booked, so it's the Lake District instead."),
])
def test_an_old_value_given_away_or_gone_ties_its_correction(old, new):
    memory = _chat()
    first = said(memory, old)
    assert item_of(said(memory, new)) == item_of(first)


def test_a_day_in_lower_case_is_a_value():
    assert {"tuesday", "thursday"} <= km.new_values("wfh days changed to tuesday and thursday")


def test_a_question_about_myself_ranks_my_own_facts_above_others():
    memory = _chat()
    said(memory, "My neighbour drives a Ford F-150.")
    mine = said(memory, "I sold the Civic and bought a Tesla Model 3.")
    found = memory.recall("What car do I drive?", space=SPACE, limit=3)
    assert found[0]["kref"] == mine
    other = next(result for result in found if result["kref"] != mine)
    assert other["signals"]["others_fact"].startswith("kin:") or other["signals"]["others_fact"] == "other"
    # ... but a question about the neighbour, or naming someone, keeps the others' facts where they are
    assert "others_fact" not in (memory.recall("What does my neighbour drive?", space=SPACE, limit=3)[0].get(
        "signals") or {})


def test_own_facts_first_leaves_notes_and_assistants_alone():
    memory = _chat()
    note = memory.remember("The neighbour drives a Ford F-150.", space=SPACE)
    said(memory, "I like pasta.")
    found = memory.recall("What does the neighbour drive, do I know?", space=SPACE, limit=3)
    assert found[0]["kref"] == note and "others_fact" not in (found[0].get("signals") or {})


# -- a user's "we" for where they live (0.8.6) -----------------------------------------------------------------

def test_we_moved_corrects_the_users_own_home(memory):
    first = said(memory, "I live in Denver, in a little apartment near Wash Park.")
    second = said(memory, "we moved to lisbon last month!! still unpacking boxes lol")
    assert item_of(second) == item_of(first)
    assert memory.recall("Where do I live?", space=SPACE)[0]["content"].startswith("we moved to lisbon")


def test_we_moved_corrects_what_we_said_of_ourselves_first(memory):
    """A "we" statement of the user's household is the one a later "we" corrects, not the user's city."""
    city = said(memory, "I live in Leeds, been here about six years")
    area = said(memory, "we're in widcombe, just south of the centre")
    moved = said(memory, "we've shifted across town to larkhall, much quieter")
    assert item_of(moved) != item_of(city)
    assert memory.get(item_of(city))["content"] == "I live in Leeds, been here about six years"
    assert item_of(area) != item_of(city)


@pytest.mark.parametrize("new", ["we relocated our headquarters to Austin", "we used to live in Lisbon",
                                 "we don't live in Lisbon", "we're moving to Lisbon next year",
                                 "we live in Lisbon during the winter", "we moved into a bigger apartment",
                                 "we live near the park"])
def test_we_of_a_company_a_past_a_plan_or_no_place_is_not_the_users_home(memory, new):
    first = said(memory, "I live in Denver")
    second = said(memory, new)
    assert item_of(second) != item_of(first)
    for result in memory.recall("Where do I live?", space=SPACE):
        assert "superseded_by" not in (result.get("signals") or {}), result     # nor ranked above it as newer


def test_we_of_another_relation_is_not_the_user(memory):
    first = said(memory, "I work at Acme as a designer.")
    second = said(memory, "we switched to Slack for everything at work")
    assert item_of(second) != item_of(first)


def test_recall_ranks_a_later_we_home_above_an_earlier_i_home_when_not_merged():
    results = [
        {"kref": "kref://p/chat/a.memory?r=1", "item_kref": "kref://p/chat/a.memory", "space": "chat",
         "content": "I live in Denver", "metadata": dict(ANN), "tags": [], "score": 1.0,
         "created_at": "2026-01-01T00:00:00Z", "signals": {}},
        {"kref": "kref://p/chat/b.memory?r=1", "item_kref": "kref://p/chat/b.memory", "space": "chat",
         "content": "we moved to Lisbon last month", "metadata": dict(ANN), "tags": [], "score": 0.5,
         "created_at": "2026-02-01T00:00:00Z", "signals": {}}]
    ordered = km.newest_first_within_relation(results, {"residence"})
    assert [result["content"] for result in ordered] == ["we moved to Lisbon last month", "I live in Denver"]
    assert ordered[1]["signals"]["superseded_by"] == "kref://p/chat/b.memory?r=1"
    other = [dict(result, content=text) for result, text in
             zip(results, ("I work at Acme", "we switched to Slack at work"))]
    assert [r["content"] for r in km.newest_first_within_relation(other, {"employer"})] == \
        ["I work at Acme", "we switched to Slack at work"]


# A statement of the speaker's past, one more of a kind, or a plan is true but not what holds now: the speaker's
# statement of what holds now is a belief of its own beside it (issue 16, session 19: a blind set merged these;
# the cases are in test_a_one_off_or_the_old_still_holding_revises_nothing). What holds now is still revised:
@pytest.mark.parametrize("old, new", [
    ("I ride a Vespa to work.", "Sold the Vespa, I ride a Yamaha now."),
    ("I'm flying to Oslo in March.", "I'm going to Bergen in March instead."),
])
def test_what_holds_now_is_still_revised(old, new):
    memory = _chat()
    first = said(memory, old)
    assert item_of(said(memory, new)) == item_of(first)


@pytest.mark.parametrize("text, holds", [
    ("i used to drive a micra", False), ("i also have a work phone", False), ("i might get a dog", False),
    ("i lived in leeds as a student", False), ("i drive a micra", True), ("i moved to leeds five years ago", True),
    ("i drive a kia but i might get a tesla", True), ("banked with them since back in uni", True),
    ("i am so used to my iphone", True),
])
def test_holds_now_reads_the_past_a_second_one_and_a_plan(text, holds):
    assert km._holds_now(text) is holds
    assert km._holds_now(text, cued=True) is (holds or "also" in text)   # "sold the mazda" may be the second one


def _recall_contents(memory: km.Memory, question: str) -> list[str]:
    return [result["content"] for result in memory.recall(question, space="chat", limit=5)]


@pytest.mark.parametrize("earlier, now, question", [
    ("Back in college I used to ride a Vespa to lectures.", "I ride a Yamaha scooter to work.",
     "What scooter do I ride?"),
    ("I rode a Vespa scooter back at uni.", "I ride a Yamaha scooter to work.", "What scooter do I ride?"),
])
def test_a_question_about_now_ranks_what_holds_now_above_a_past_habit(earlier, now, question):
    memory = _chat()
    said(memory, earlier)
    said(memory, now)
    found = memory.recall(question, space="chat", limit=5)
    assert found[0]["content"] == now
    weighed = [result for result in found if result["content"] == earlier]
    assert weighed and weighed[0]["signals"].get("not_now") is True


@pytest.mark.parametrize("earlier, now, question", [
    ("I also keep a spare Nokia phone in the car.", "My phone is a Pixel 7.", "What's my spare phone?"),
    ("I'm planning to run the Oslo marathon.", "I run a 5k every Sunday.", "Which marathon am I planning to run?"),
    ("I used to smoke a pack a day.", "I run a 5k every Sunday.", "Do I smoke?"),
])
def test_a_plan_one_more_or_a_yes_or_no_question_keeps_its_answer(earlier, now, question):
    memory = _chat()
    said(memory, earlier)
    said(memory, now)
    found = memory.recall(question, space="chat", limit=5)
    assert found[0]["content"] == earlier
    assert not any(result["signals"].get("not_now") for result in found)


def test_a_question_about_the_past_keeps_the_past_where_it_ranks():
    memory = _chat()
    said(memory, "Back in college I used to ride a Vespa to lectures.")
    said(memory, "I ride a Yamaha scooter to work.")
    found = memory.recall("What scooter did I ride in college?", space="chat", limit=5)
    assert any(result["content"].startswith("Back in college") for result in found)
    assert not any(result["signals"].get("not_now") for result in found)


def test_getting_used_to_something_is_no_past():
    assert km._holds_now("relocated to glasgow, still getting used to the rain")
    assert not km._holds_now("i used to live in glasgow")


# Someone who looks after the speaker's things changing one of them: the speaker's own fact (issue 16, session 19)
@pytest.mark.parametrize("old, new", [
    ("I take 50mg of atenolol each night.", "My GP lowered my atenolol to 25mg."),
    ("My weekly review with my boss is on Mondays.", "My boss moved our weekly review to Wednesdays."),
])
def test_a_carer_changing_the_speakers_thing_revises_the_speakers_belief(old, new):
    memory = _chat()
    first = said(memory, old)
    assert item_of(said(memory, new)) == item_of(first)


@pytest.mark.parametrize("text, owner", [
    ("My GP lowered my atenolol to 25mg.", "self"), ("my boss moved our review to friday", "self"),
    ("My mum lowered her rent to 500.", "kin:mother"), ("My boss is called Irene.", "self"),
])
def test_a_carer_acting_on_the_speaker_is_the_speakers_fact(text, owner):
    assert km.chat_owner(text) == owner


# A well-known value named with "now" or "these days" is a change to it (KNOWN_VALUES, session 19's additions)
@pytest.mark.parametrize("old, new", [
    ("I keep my notes in Evernote.", "I keep everything in Obsidian now."),
    ("We track our sprint tasks in Jira.", "we're on Asana these days"),
    ("I wear a Fitbit on my wrist.", "I'm a Garmin person now"),
    ("My mobile network is Voxi.", "I'm with giffgaff now, cheaper data"),
])
def test_a_known_value_said_with_now_revises_the_belief_of_its_kind(old, new):
    memory = _chat()
    first = said(memory, old)
    assert item_of(said(memory, new)) == item_of(first)


@pytest.mark.parametrize("old, new", [
    ("I keep my notes in Evernote.", "right now I'm reading about Obsidian plugins"),    # "right now": a doing
    ("I wear a Fitbit on my wrist.", "my brother is a Garmin person now"),              # another person's
    ("My mobile network is Voxi.", "I might go with giffgaff now"),                      # a plan
])
def test_a_known_value_named_now_by_another_or_as_a_plan_changes_nothing(old, new):
    memory = _chat()
    first = said(memory, old)
    assert item_of(said(memory, new)) != item_of(first)


def test_a_dish_answers_a_question_about_food():
    memory = _chat()
    said(memory, "It's been raining all week.")
    ramen = said(memory, "I could eat ramen every single day.")
    found = memory.recall("What food do I like?", space="chat", limit=1)
    assert found and found[0]["kref"].split("?")[0] == ramen.split("?")[0]


# A message indexed again when a neighbour arrives keeps its stored length (implied words left out of it), as a
# reopened store reads it: before 0.8.8 a message with an implied word ("pizza": food) scored 0.694 in the process
# that wrote it and 0.721 after a reopen
def test_a_message_with_an_implied_word_scores_the_same_after_a_reopen(tmp_path):
    path = str(tmp_path / "store.db")
    with km.Memory(path, clock=km.ManualClock("2026-01-01T00:00:00Z", tick=60)) as memory:
        for text in CHATTER[:6]:
            said(memory, text.replace("lasagne", "pizza"))
        said(memory, "my hairdresser is called jodie")
        for text in CHATTER[6:]:
            said(memory, text.replace("lasagne", "pizza"))
        said(memory, "jodie's retired so it's a new salon for me now")
        here = [(r["kref"], r["score"]) for r in memory.recall("Who is my hairdresser?", space=SPACE)]
        memory.backend.warm_recall_index()
    with km.Memory(path) as reopened:
        assert [(r["kref"], r["score"]) for r in reopened.recall("Who is my hairdresser?", space=SPACE)] == here


def test_a_change_of_plan_echoes_no_plan():
    # "Change of plan: ..." names no plan that changed: an earlier "the wedding's planned for autumn" stays apart
    memory = _chat()
    first = said(memory, "I'm engaged to Marcus, the wedding's planned for next autumn.")
    assert item_of(said(memory, "Change of plan: Cornwall was fully booked, so it's the Lakes instead.")) != \
        item_of(first)


_CHAT_WORDS = ("pizza", "ramen", "knitting", "airline", "dog", "guitar", "rain", "work", "train", "sister", "salon",
               "jodie", "week", "moved", "Spain", "Lisbon", "keto", "3", "tuesday", "the", "a", "my", "today")


def _indexed_documents(memory: km.Memory) -> dict[int, tuple]:
    """Every document of the embedded recall index as it was indexed: (length, shortness) and its terms."""
    state = memory.backend._recall
    index = state.index
    return {doc: (index.slot_stats(index.doc_slot[doc]), sorted(index.term_frequencies(doc).items()))
            for doc in state.doc_item if doc in index}


@hypothesis.settings(max_examples=40, deadline=None,
                     suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture])
@hypothesis.given(messages=st.lists(st.lists(st.sampled_from(_CHAT_WORDS), min_size=1, max_size=8),
                                    min_size=2, max_size=12))
def test_a_thread_of_messages_is_indexed_the_same_in_the_writer_and_after_a_reopen(tmp_path_factory, messages):
    # messages in one thread lend each other words and some imply words a question asks by (pizza: food; Spain:
    # where; 3: how many): the process that wrote them (its index live between writes, as stacking keeps it)
    # and a reopened store that builds its index from the tables index every message with the same length and
    # words. (Scores may still differ a little: the average length BM25 uses is frozen at a point of each
    # process's own history, ``RecallIndex.reference_length``.)
    path = str(tmp_path_factory.mktemp("thread") / "store.db")
    with km.Memory(path, clock=km.ManualClock("2026-01-01T00:00:00Z", tick=60)) as memory:
        for words in messages:
            memory.remember(" ".join(words), space=SPACE, metadata={**ANN, "thread_id": "t1"})
            memory.recall(f"pizza {words[0]}", space=SPACE, limit=1)    # (a query of stop words alone reads no index)
        here = _indexed_documents(memory)
    with km.Memory(path) as reopened:
        reopened.recall("pizza", space=SPACE, limit=1)
        assert _indexed_documents(reopened) == here


def test_an_idiom_of_change_is_nothing_to_name_again():
    assert "plan" not in km.echo_anchors("Change of plan: Cornwall was fully booked, so it's the Lakes instead.")
    assert "plan" not in km.changed_words("Change of plan: Cornwall was fully booked, so it's the Lakes instead.")
    assert "plan" in km.changed_words("switched to Plan B with Vodafone")



@pytest.mark.parametrize("fact, later, question", [
    ("My car is a blue Ford Focus.", "my brother finally picked up a Kia Sportage", "What car do I have?"),
    ("My car is a blue Ford Focus.", "I might get a Kia Sportage next year", "What car do I have?"),
    ("My car is a blue Ford Focus.", "I also have a Kia Sportage for the farm", "What car do I have?"),
    ("My car is a blue Ford Focus.", "I used to have a Kia Sportage back at uni", "What car do I have?"),
    ("My car is a blue Ford Focus.", "hired a Kia Sportage for the weekend in Skye", "What car do I have?"),
    ("My car is a blue Ford Focus.", "is a Kia Sportage any good?", "What car do I have?"),
    ("My car is a blue Ford Focus.", "the Ford needs new tyres before winter", "What car do I have?"),   # the same
    ("I used to drive a Nissan Micra.", "finally picked up a Kia Sportage", "What car do I drive?"),   # past
    ("We watched Le Mans on the big screen.", "the garmin tracks my runs better", "What watch do I wear?"),
    ("I write Python at work.", "these days I mostly write Kotlin", "What programming language do I code in?"),
    # a blind review's look-alikes: a gift, a team's, another's car acting on the speaker, a spare
    ("I wear a Garmin Venu.", "got my dad an Oura ring for christmas, hope he likes it", "What watch do I wear?"),
    ("My notes app is Notion.", "my whole team uses Obsidian, I'm the odd one out", "What notes app do I use?"),
    ("I drive a Ford Fiesta.", "oh great, a Vauxhall Corsa just reversed into me at Tesco", "What car do I drive?"),
    ("I drive a Ford Fiesta.", "ended up getting a Kia Niro for my wife", "What car do I drive?"),
    ("My phone is a Pixel 7.", "I keep a cheap Samsung as a spare in my bag", "What phone do I have?")])
def test_a_later_well_known_value_that_does_not_take_the_place_of_the_earlier_one_supersedes_nothing(
        fact, later, question):
    memory = _chat()
    memory.remember(fact, space=SPACE, metadata=dict(ANN))
    memory.remember(later, space=SPACE, metadata=dict(ANN))
    for result in memory.recall(question, space=SPACE, limit=5):
        assert "?" not in (result.get("signals") or {}).get("on_topic", ()), result


@pytest.mark.parametrize("text, owner", [
    ("the neighbours have just got a whippet", "other"), ("these lads from the gym swear by creatine", "other"),
    ("my neighbours drive a Volvo", "kin:neighbour"), ("the neighbour has a whippet", "other"),
    # ... unless they change something of the speaker's (as "boss put me on the night rota" does)
    ("the lads at work moved me onto nights", "self"), ("a guy on my team switched me to a MacBook", "self"),
    ("a guy on my team just got promoted", "other")])
def test_people_in_the_plural_own_their_own_facts(text, owner):
    # 0.8.9: "the neighbours" (plural) read as the speaker's own fact, so a correction could revise it
    assert km.chat_owner(text) == owner


@pytest.mark.parametrize("fact, later", [
    ("the neighbours have just got a whippet that barks at our cat",           # another's fact, then one's own
     "our cat has a new housemate since saturday: a rescue whippet called Bramble"),
    ("My GP is Dr Rahman at the Mill Lane surgery.", "the physio reckons my back pain is a disc problem"),
    ("my surgery is the one on Mill Lane", "the physio reckons my back pain is a disc problem"),
    ("my car insurance is with Aviva", "my scooter got stolen so it's the tram until the insurance pays out"),
    # a thing of the value's or done for it is not the value: "my laptop bag", "my car needs", "in my car"
    ("My laptop is a Dell XPS 15.", "My laptop sleeve is a green felt one."),
    ("I drive a 2016 Toyota Auris.", "My car needs new brake pads next month."),
    ("I drive a 2016 Toyota Auris.", "I keep an umbrella in my car at all times."),
    # a hostile review's: the rules let a request to the assistant or a bare reply replace the fact it was about
    ("I work as a nurse.", "write me a cover letter for a nursing job"),
    ("I'm vegetarian.", "make a vegetarian version for me"),
    ("My favourite band is Radiohead.", "recommend more bands like Radiohead"),
    ("I moved to day shifts now, so much better", "great, much better")])
def test_a_statement_that_only_shares_a_word_or_a_loose_relation_revises_nothing(fact, later):
    # 0.8.9, from a tuned set's wrong merges (in our words): a fact of the neighbours' is not the speaker's; a
    # GP's "surgery" is no operation had; an insurer is not a claim paid out; a request or a reply states nothing
    memory = _chat()
    first = memory.remember(fact, space=SPACE, stack=True, metadata=dict(ANN))
    assert item_of(memory.remember(later, space=SPACE, stack=True, metadata=dict(ANN))) != item_of(first)
    assert memory.get(item_of(first))["content"] == fact
