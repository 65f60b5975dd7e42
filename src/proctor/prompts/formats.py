"""Output formats: how an assistant turn is written (`format_action`) and read back (`parse_output`).

| format           | what the assistant writes                                  | origin            |
|------------------|------------------------------------------------------------|-------------------|
| `plain`          | `go to fridge 1`                                           | -                 |
| `reason_action`  | `REASON: I need the apple.\nACTION: go to fridge 1`        | AgentPRM          |
| `thought_action` | `Thought: I need the apple.\nAction: go to fridge 1`       | ReAct, SPA-RL     |
| `xml`            | `<think>I need the apple.</think>\n<action>go to fridge 1</action>` | verl-agent |

The reason line is left out when there is no reason. Parsers never raise: output without the format's
action marker gives `Candidate(parsed=False)` with a best-effort action (the last non-empty line, its
markers removed), or "" for empty output. An action copied with its list bullet ("- go to fridge 1", as
small models copy it from the admissible list) is read without it.
"""

from __future__ import annotations

import re
from typing import Literal

from proctor.prompts.turns import Candidate

OutputFormat = Literal["plain", "reason_action", "thought_action", "xml"]
FORMATS: tuple[str, ...] = ("plain", "reason_action", "thought_action", "xml")

#: the (reason, action) line markers of the line-based formats
_MARKERS: dict[str, tuple[str, str]] = {
    "reason_action": ("REASON:", "ACTION:"),
    "thought_action": ("Thought:", "Action:"),
}

#: how each format is described to the model in the default system prompt
FORMAT_INSTRUCTIONS: dict[str, str] = {
    "plain": "Reply with the next action only, on a single line.",
    "reason_action": (
        "Reply in two lines: 'REASON: <why this action helps>' then 'ACTION: <the next action>'."
    ),
    "thought_action": (
        "Reply in two lines: 'Thought: <your reasoning>' then 'Action: <the next action>'."
    ),
    "xml": "Reply as <think>your reasoning</think> then <action>the next action</action>.",
}

#: the line after the admissible list: which reply to give (small instruct models follow it, not the system turn)
LIST_INSTRUCTIONS: dict[str, str] = {
    "plain": "Reply with exactly one action from the list, and nothing else.",
    "reason_action": "Reply with 'REASON: <why>' then 'ACTION: <exactly one action from the list>'.",
    "thought_action": "Reply with 'Thought: <your reasoning>' then 'Action: <exactly one action from the list>'.",
    "xml": "Reply as <think>your reasoning</think> then <action>exactly one action from the list</action>.",
}

#: where generation stops for each format unless an agent sets `stop`: the end of the action (a one-line action
#: ends at its newline; the two-line formats at a blank line; xml at its closing tag). The stop string is cut
#: from the text, which the parsers read the same way.
DEFAULT_STOPS: dict[str, tuple[str, ...]] = {
    "plain": ("\n",),
    "reason_action": ("\n\n",),
    "thought_action": ("\n\n",),
    "xml": ("</action>",),
}


def stop_strings(fmt: str, stop: list[str] | tuple[str, ...] | None) -> list[str]:
    """The stop strings an agent uses: `stop` when given (`[]`: none), else the format's `DEFAULT_STOPS`."""
    check_format(fmt)
    return list(DEFAULT_STOPS[fmt] if stop is None else stop)


_XML_ACTION = re.compile(r"<action>(.*?)</action>", re.DOTALL | re.IGNORECASE)
_XML_ACTION_OPEN = re.compile(r"<action>(.*)", re.DOTALL | re.IGNORECASE)
_XML_THINK = re.compile(r"<think>(.*?)(?:</think>|<action>|$)", re.DOTALL | re.IGNORECASE)
_XML_TAG = re.compile(r"</?(?:think|action)>", re.IGNORECASE)


def check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise ValueError(f"unknown output format {fmt!r}; choose one of {', '.join(FORMATS)}")


def write_output(action: str, reason: str | None, fmt: str) -> str:
    """The assistant text for `action` (and its `reason`, if any) in format `fmt`."""
    check_format(fmt)
    reason = (reason or "").strip() or None
    if fmt == "plain":
        return action
    if fmt == "xml":
        head = f"<think>{reason}</think>\n" if reason else ""
        return f"{head}<action>{action}</action>"
    reason_marker, action_marker = _MARKERS[fmt]
    head = f"{reason_marker} {reason}\n" if reason else ""
    return f"{head}{action_marker} {action}"


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _strip_markers(line: str, markers: tuple[str, ...]) -> str:
    for m in markers:
        if line.lower().startswith(m.lower()):
            return line[len(m):].strip()
    return line


def _parse_plain(text: str) -> Candidate:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    action = lines[0] if lines else ""
    return Candidate(action=action, raw_output=text, parsed=bool(action))


def _parse_marked(text: str, fmt: str) -> Candidate:
    reason_marker, action_marker = _MARKERS[fmt]
    am = re.search(rf"{re.escape(action_marker)}[ \t]*(.*)", text, re.IGNORECASE)
    rm = re.search(rf"{re.escape(reason_marker)}\s*(.*?)\s*(?={re.escape(action_marker)}|$)", text,
                   re.IGNORECASE | re.DOTALL)
    reason = rm.group(1).strip() if rm and rm.group(1).strip() else None
    if am is None:
        action = _strip_markers(_last_line(text), (reason_marker, action_marker))
        if rm is not None and action == reason:
            action = ""
        return Candidate(action=action, reason=reason, raw_output=text, parsed=False)
    action = am.group(1).strip()
    return Candidate(action=action, reason=reason, raw_output=text, parsed=bool(action))


def _parse_xml(text: str) -> Candidate:
    tm = _XML_THINK.search(text)
    reason = tm.group(1).strip() if tm and tm.group(1).strip() else None
    m = _XML_ACTION.search(text)
    if m is not None:
        action = m.group(1).strip()
        return Candidate(action=action, reason=reason, raw_output=text, parsed=bool(action))
    m = _XML_ACTION_OPEN.search(text)
    action = _XML_TAG.sub("", m.group(1)).strip() if m else ("" if tm else _XML_TAG.sub("", _last_line(text)))
    return Candidate(action=action, reason=reason, raw_output=text, parsed=False)


def read_output(text: str, fmt: str) -> Candidate:
    """Parse model output in format `fmt` into a `Candidate` (see module docstring); never raises."""
    check_format(fmt)
    text = text or ""
    if fmt == "plain":
        cand = _parse_plain(text)
    elif fmt == "xml":
        cand = _parse_xml(text)
    else:
        cand = _parse_marked(text, fmt)
    if cand.action.startswith("- "):
        cand.action = cand.action[2:].strip()
        cand.parsed = cand.parsed and bool(cand.action)
    return cand
