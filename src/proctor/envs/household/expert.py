"""The two household experts.

- `oracle_action(spec, world)`: a planner that reads the true world state (where every object is); the
  env serves it as `info["expert_action"]` (use `ExpertAgent("oracle")` with `expert_hints=True`).
- `search_policy(prefix)`, registered as expert `search`: sees only what an agent sees (task text,
  history of actions and observations, current observation). It rebuilds what it has seen from the text,
  then fetches, transforms and places like the oracle, exploring unseen receptacles when it does not
  know where something is: first the receptacle types where such an object plausibly lies (commonsense),
  open surfaces before closed doors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from proctor.envs.experts import register_expert
from proctor.envs.household.grammar import NOTHING, parse_command, parse_listing
from proctor.envs.household.tasks import TaskSpec, parse_task
from proctor.envs.household.world import (
    APPLIANCES,
    FLAGS,
    LAMP,
    LAMP_HOSTS,
    LAMP_NAME,
    OBJECTS,
    World,
    kind_of,
)
from proctor.prompts.turns import Prefix


def _first_of(receptacles: list[str], rtype: str) -> str:
    return next(r for r in receptacles if kind_of(r) == rtype)


def _target_receptacle(spec: TaskSpec, receptacles: list[str], contents: dict[str, list[str]]) -> str:
    """Where to put the object: a target receptacle already holding one of its kind, else the first one."""
    for r in receptacles:
        if kind_of(r) == spec.target and any(kind_of(o) == spec.obj for o in contents.get(r, [])):
            return r
    return _first_of(receptacles, spec.target)


def _reach(location: str | None, r: str, closed: bool, then: str) -> str:
    """Go to `r`, open it if it is closed, then do `then`."""
    if location != r:
        return f"go to {r}"
    return f"open {r}" if closed else then


def oracle_action(spec: TaskSpec, w: World) -> str:
    """The privileged planner's next action in world `w` (knows where every object is)."""
    held = w.holding
    if held is not None and kind_of(held) != spec.obj:
        here = w.location or w.receptacles[0]
        return _reach(w.location, here, not w.accessible(here), f"move {held} to {here}")
    if held is not None:
        return _carry(
            spec,
            held,
            w.location,
            w.receptacles,
            w.contents,
            w.flags.get(held, set()),
            w.lamp_location(),
            lambda r: not w.accessible(r),
        )
    tgt = None if spec.kind == "examine" else _target_receptacle(spec, w.receptacles, w.contents)
    candidates = [
        (r, o)
        for r in w.receptacles
        for o in w.contents[r]
        if kind_of(o) == spec.obj and not (spec.kind == "pick_two" and r == tgt)
    ]
    r, o = next(((r, o) for r, o in candidates if r == w.location), candidates[0])
    return _reach(w.location, r, not w.accessible(r), f"take {o} from {r}")


def _carry(
    spec: TaskSpec,
    held: str,
    location: str | None,
    receptacles: list[str],
    contents: dict[str, list[str]],
    flags: set[str],
    lamp_at: str | None,
    is_closed: Callable[[str], bool],
) -> str:
    """Next action while carrying an object of the task's type (lamp location known for examine)."""
    if spec.kind == "examine":
        assert lamp_at is not None
        return _reach(location, lamp_at, False, f"use {LAMP_NAME}")
    if spec.flag is not None and spec.flag not in flags:
        appliance = _first_of(receptacles, APPLIANCES[spec.kind])
        return _reach(location, appliance, False, f"{spec.kind} {held} with {appliance}")
    tgt = _target_receptacle(spec, receptacles, contents)
    return _reach(location, tgt, is_closed(tgt), f"move {held} to {tgt}")


@dataclass
class Memory:
    """What an agent knows after reading its history: where it is, what it carries, what it has seen."""

    receptacles: list[str]
    location: str | None = None
    holding: str | None = None
    seen: dict[str, list[str]] = field(default_factory=dict)  # receptacle -> contents last seen
    closed: set[str] = field(default_factory=set)  # receptacles seen closed
    flags: dict[str, set[str]] = field(default_factory=dict)

    def update(self, action: str, result: str) -> None:
        """Apply one (action, observation) pair of the history."""
        parsed = parse_command(action)
        if result == NOTHING or parsed is None:
            return
        verb, args = parsed
        if verb == "go":
            self.location = args[0]
            self._saw(args[0], result)
        elif verb in ("open", "examine") and args[0] == self.location:
            self._saw(args[0], result)
        elif verb == "close":
            self.closed.add(args[0])
        elif verb == "take":
            self.holding = args[0]
            items = self.seen.get(args[1], [])
            if args[0] in items:
                items.remove(args[0])
        elif verb == "move":
            self.holding = None
            self.seen.setdefault(args[1], []).append(args[0])
        elif verb == "transform":
            self.flags.setdefault(args[1], set()).add(FLAGS[args[0]])

    def _saw(self, r: str, text: str) -> None:
        if f"The {r} is closed." in text:
            self.closed.add(r)
            self.seen.pop(r, None)
        elif "you see" in text:
            self.closed.discard(r)
            self.seen[r] = parse_listing(text)

    def lamp_location(self) -> str | None:
        return next((r for r, items in self.seen.items() for o in items if kind_of(o) == LAMP), None)

    def explore(self, want: str) -> str:
        """Open the closed receptacle here, or go to the most promising receptacle not yet looked into."""
        if self.location in self.closed:
            return f"open {self.location}"
        likely = LAMP_HOSTS if want == LAMP else OBJECTS[want].places
        unseen = [r for r in self.receptacles if r not in self.seen]
        if not unseen:
            return "look"
        rank = {t: i for i, t in enumerate(likely)}
        best = min(unseen, key=lambda r: rank.get(kind_of(r), len(rank)))
        return f"go to {best}"


def read_memory(prefix: Prefix) -> Memory:
    """Rebuild the agent's knowledge from the prefix's text alone."""
    observations = [s.observation for s in prefix.history] + [prefix.observation]
    room = observations[0].split("\n\nYour task is to:")[0]
    memory = Memory(receptacles=parse_listing(room))
    for step, result in zip(prefix.history, observations[1:], strict=True):
        memory.update(step.action, result)
    return memory


@register_expert("household", "search")
def search_policy(prefix: Prefix) -> str:
    """The searching expert: a pure function of the task text and the observed history."""
    spec = parse_task(prefix.task)
    m = read_memory(prefix)
    held = m.holding
    if held is not None and kind_of(held) != spec.obj:
        if m.location is None:
            return f"go to {m.receptacles[0]}"
        return _reach(m.location, m.location, m.location in m.closed, f"move {held} to {m.location}")
    if held is not None:
        lamp_at = m.lamp_location()
        if spec.kind == "examine" and lamp_at is None:
            return m.explore(LAMP)
        return _carry(
            spec,
            held,
            m.location,
            m.receptacles,
            m.seen,
            m.flags.get(held, set()),
            lamp_at,
            lambda r: r in m.closed,
        )
    tgt = None if spec.kind == "examine" else _target_receptacle(spec, m.receptacles, m.seen)
    candidates = [
        (r, o)
        for r in m.receptacles
        for o in m.seen.get(r, [])
        if kind_of(o) == spec.obj and not (spec.kind == "pick_two" and r == tgt)
    ]
    if not candidates:
        return m.explore(spec.obj)
    r, o = next(((r, o) for r, o in candidates if r == m.location), candidates[0])
    return _reach(m.location, r, r in m.closed, f"take {o} from {r}")
