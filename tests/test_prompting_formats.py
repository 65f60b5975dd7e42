"""Output formats: writing an assistant turn and parsing model output back, malformed output included."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proctor.prompts.formats import FORMATS
from proctor.prompts.render import PromptConfig, format_action, parse_output
from proctor.trajectory import Step


@pytest.mark.parametrize(
    ("fmt", "reason", "expected"),
    [
        ("plain", "why", "go to fridge 1"),
        ("reason_action", "I need the apple.", "REASON: I need the apple.\nACTION: go to fridge 1"),
        ("reason_action", None, "ACTION: go to fridge 1"),
        ("thought_action", "I need the apple.", "Thought: I need the apple.\nAction: go to fridge 1"),
        ("thought_action", "  ", "Action: go to fridge 1"),
        ("xml", "I need the apple.", "<think>I need the apple.</think>\n<action>go to fridge 1</action>"),
        ("xml", None, "<action>go to fridge 1</action>"),
    ],
)
def test_format_action_writes_each_format(fmt, reason, expected):
    assert format_action("go to fridge 1", reason, PromptConfig(format=fmt)) == expected


def test_format_action_takes_action_and_reason_from_a_step():
    step = Step(observation="o", action="open drawer 2", reason="it may hold the key")
    cfg = PromptConfig(format="thought_action")
    assert format_action(step, None, cfg) == "Thought: it may hold the key\nAction: open drawer 2"
    assert format_action(step, "override", cfg) == "Thought: override\nAction: open drawer 2"


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("reason", [None, "the key is usually in a drawer"])
def test_parse_inverts_format(fmt, reason):
    cfg = PromptConfig(format=fmt)
    cand = parse_output(format_action("open drawer 2", reason, cfg), cfg)
    assert cand.parsed
    assert cand.action == "open drawer 2"
    assert cand.reason == (None if fmt == "plain" else reason)


@given(action=st.from_regex(r"[a-z0-9][a-z0-9 ,/]{0,30}[a-z0-9]", fullmatch=True),
       reason=st.one_of(st.none(), st.from_regex(r"[A-Za-z][A-Za-z ,.']{0,40}[a-z.]", fullmatch=True)),
       fmt=st.sampled_from(FORMATS))
def test_parse_inverts_format_for_any_single_line_action(action, reason, fmt):
    cfg = PromptConfig(format=fmt)
    cand = parse_output(format_action(action, reason, cfg), cfg)
    assert (cand.parsed, cand.action) == (True, action)


@pytest.mark.parametrize(
    ("fmt", "text", "action", "reason", "parsed"),
    [
        # plain: the first non-empty line
        ("plain", "\n  take apple 1  \nmore text", "take apple 1", None, True),
        ("plain", "", "", None, False),
        ("plain", " \n\n ", "", None, False),
        ("plain", "- go to cabinet 1\n- look", "go to cabinet 1", None, True),  # copied with its list bullet
        # reason_action: marker case-insensitive, action ends at the line end
        ("reason_action", "reason: hungry\naction: eat apple\nREASON: again", "eat apple", "hungry", True),
        ("reason_action", "REASON: I should look around first", "", "I should look around first", False),
        ("reason_action", "go to desk 1", "go to desk 1", None, False),
        ("reason_action", "REASON: x\nACTION:", "", "x", False),
        ("reason_action", "ACTION: look", "look", None, True),
        ("reason_action", "ACTION: - look", "look", None, True),
        # thought_action: the first Action line (a hallucinated continuation is ignored)
        ("thought_action", "Thought: t1\nAction: go north\nObservation: x\nAction: go south", "go north", "t1", True),
        ("thought_action", "Thought: only thinking", "", "only thinking", False),
        ("thought_action", "Action:   ", "", None, False),
        # xml: closed tag, unclosed tag (truncated output), no tag
        ("xml", "<think>hm</think><action> take key </action> trailing", "take key", "hm", True),
        ("xml", "<think>hm</think>\n<action>take ke", "take ke", "hm", False),
        ("xml", "<think>still thinking", "", "still thinking", False),
        ("xml", "just words", "just words", None, False),
        ("xml", "<ACTION>look</ACTION>", "look", None, True),
        ("xml", "", "", None, False),
    ],
)
def test_parse_malformed_and_edge_outputs(fmt, text, action, reason, parsed):
    cand = parse_output(text, PromptConfig(format=fmt))
    assert (cand.action, cand.reason, cand.parsed) == (action, reason, parsed)
    assert cand.raw_output == text


@given(text=st.text(max_size=200), fmt=st.sampled_from(FORMATS))
def test_parse_never_raises(text, fmt):
    cand = parse_output(text, PromptConfig(format=fmt))
    assert isinstance(cand.action, str)
    assert "\n" not in cand.action or fmt == "xml"


def test_unknown_format_is_rejected():
    with pytest.raises(ValueError, match="format"):
        PromptConfig(format="json")


def test_stop_strings_default_to_the_end_of_each_formats_action():
    from proctor.prompts.formats import stop_strings

    assert stop_strings("plain", None) == ["\n"]
    assert stop_strings("thought_action", None) == ["\n\n"]
    assert stop_strings("xml", None) == ["</action>"]
    assert stop_strings("plain", []) == []
    with pytest.raises(ValueError, match="unknown output format"):
        stop_strings("yaml", None)
    # a two-line output cut at the blank line still parses to its action
    text = "Thought: I need the apple.\nAction: go to fridge 1\n\nnoise"
    assert parse_output(text.split("\n\n")[0], PromptConfig(format="thought_action")).action == "go to fridge 1"
