"""`HouseholdEnv`: an ALFWorld-like household in pure Python (text, grammar and task types of ALFWorld)."""

from __future__ import annotations

from typing import Any, ClassVar

from proctor.envs.base import SPLITS, StepOutcome, TextEnv
from proctor.envs.household.expert import oracle_action
from proctor.envs.household.grammar import NOTHING, listing, parse_command
from proctor.envs.household.presets import DEFAULT_PRESET, get_preset
from proctor.envs.household.tasks import COMPOSITION_SPLIT, TaskSpec, generate, goal_reached, make_task_id
from proctor.envs.household.world import APPLIANCES, FLAGS, LAMP, World, kind_of
from proctor.envs.registry import register

DEFAULT_NUM_TASKS: dict[str, int] = {"train": 2000, "valid": 200, "test": 200, COMPOSITION_SPLIT: 200}


@register("household", "ALFWorld-like household: find, transform and place objects (6 task types)")
class HouseholdEnv(TextEnv):
    """ALFWorld-like household: find, transform and place objects (6 task types)."""

    help_text: ClassVar[str] = (
        "Household (ALFWorld-like). Commands:\n"
        "  go to <receptacle>            open <receptacle>        close <receptacle>\n"
        "  take <object> from <receptacle>\n"
        "  move <object> to <receptacle>   (also: put <object> in/on <receptacle>)\n"
        "  clean <object> with sinkbasin N   heat <object> with microwave N   cool <object> with fridge N\n"
        "  use desklamp N   examine <object|receptacle>   look   inventory\n"
        "You carry one object at a time. Invalid commands answer 'Nothing happens.'"
    )

    def __init__(
        self,
        seed: int = 0,
        num_tasks: dict[str, int] | None = None,
        max_steps: int = 30,
        expert_hints: bool = False,
        preset: str = DEFAULT_PRESET,
    ):
        """`preset`: the room size and task types of this env's task ids (`standard`, or `small` for CPU-sized
        runs; see `proctor.envs.household.presets`)."""
        counts = {**DEFAULT_NUM_TASKS, **(num_tasks or {})}
        unknown = set(counts) - set(self.splits())
        if unknown:
            raise ValueError(
                f"household: unknown split(s) in num_tasks: {sorted(unknown)}; known: {self.splits()}"
            )
        get_preset(preset)
        extra = {} if preset == DEFAULT_PRESET else {"preset": preset}
        super().__init__(max_steps=max_steps, expert_hints=expert_hints, seed=seed, num_tasks=counts, **extra)
        self.preset = preset
        self.task_seed = int(seed)
        self.num_tasks = counts
        self.spec_task: TaskSpec | None = None
        self.world: World | None = None

    def splits(self) -> tuple[str, ...]:
        return (*SPLITS, COMPOSITION_SPLIT)

    def task_ids(self, split: str) -> list[str]:
        if split not in self.num_tasks:
            raise ValueError(f"household: unknown split {split!r}; known: {self.splits()}")
        return [make_task_id(self.task_seed, split, i, self.preset) for i in range(self.num_tasks[split])]

    # -- episode ------------------------------------------------------------------------------------
    def _reset(self, task_id: str, seed: int) -> tuple[str, dict[str, Any]]:
        """Start `task_id`; the episode is fully determined by the id (the reset seed does not change it)."""
        spec, text, world = generate(task_id)
        self.spec_task, self.world = spec, world
        obs = (
            "You are in the middle of a room. Looking quickly around you, you see "
            f"{listing(world.receptacles)}.\n\nYour task is to: {text}"
        )
        return obs, {"task": text, "task_type": spec.kind}

    def _step(self, action: str) -> StepOutcome:
        w = self.world
        assert w is not None and self.spec_task is not None
        parsed = parse_command(action)
        obs = None if parsed is None else getattr(self, f"_do_{parsed[0]}")(w, *parsed[1])
        if obs is None:
            return StepOutcome(NOTHING, 0.0, terminated=False, valid=False)
        won = goal_reached(self.spec_task, w)
        return StepOutcome(obs, 1.0 if won else 0.0, terminated=won, won=won)

    def _describe(self, w: World, r: str) -> str:
        if w.openable(r):
            if not w.is_open[r]:
                return f"The {r} is closed."
            return f"The {r} is open. In it, you see {listing(w.contents[r])}."
        return f"On the {r}, you see {listing(w.contents[r])}."

    def _here(self, w: World, r: str) -> bool:
        return w.location == r and r in w.contents

    def _do_go(self, w: World, r: str) -> str | None:
        if r not in w.contents:
            return None
        w.location = r
        return f"You arrive at {r}. {self._describe(w, r)}"

    def _do_open(self, w: World, r: str) -> str | None:
        if not self._here(w, r) or not w.openable(r) or w.is_open[r]:
            return None
        w.is_open[r] = True
        return f"You open the {r}. {self._describe(w, r)}"

    def _do_close(self, w: World, r: str) -> str | None:
        if not self._here(w, r) or not w.openable(r) or not w.is_open[r]:
            return None
        w.is_open[r] = False
        return f"You close the {r}."

    def _do_take(self, w: World, o: str, r: str) -> str | None:
        if w.holding is not None or not self._here(w, r) or not w.accessible(r):
            return None
        if o not in w.contents[r] or kind_of(o) == LAMP:
            return None
        w.contents[r].remove(o)
        w.holding = o
        return f"You pick up the {o} from the {r}."

    def _do_move(self, w: World, o: str, r: str) -> str | None:
        if w.holding != o or not self._here(w, r) or not w.accessible(r):
            return None
        w.contents[r].append(o)
        w.holding = None
        return f"You move the {o} to the {r}."

    def _do_transform(self, w: World, verb: str, o: str, r: str) -> str | None:
        if w.holding != o or not self._here(w, r) or kind_of(r) != APPLIANCES[verb]:
            return None
        flags = w.flags[o]
        flags.add(FLAGS[verb])
        if verb == "heat":
            flags.discard("cool")
        elif verb == "cool":
            flags.discard("hot")
        return f"You {verb} the {o} using the {r}."

    def _do_use(self, w: World, lamp: str) -> str | None:
        if kind_of(lamp) != LAMP or w.location is None or lamp not in w.contents[w.location]:
            return None
        w.lamp_on = True
        return f"You turn on the {lamp}."

    def _do_examine(self, w: World, name: str) -> str | None:
        if name == w.location:
            return self._describe(w, name)
        visible = w.holding == name or (
            w.location is not None and w.accessible(w.location) and name in w.contents[w.location]
        )
        if not visible:
            return None
        if kind_of(name) == LAMP:
            return f"The {name} is {'on' if w.lamp_on else 'off'}."
        state = " and ".join(sorted(w.flags[name])) or "normal"
        return f"This is a {state} {name}."

    def _do_look(self, w: World) -> str:
        if w.location is None:
            return f"You are in the middle of a room. Looking quickly around you, you see {listing(w.receptacles)}."
        return f"You are facing the {w.location}. Next to it, you see nothing."

    def _do_inventory(self, w: World) -> str:
        return f"You are carrying: a {w.holding}." if w.holding else "You are not carrying anything."

    # -- actions ------------------------------------------------------------------------------------
    def admissible_actions(self) -> list[str]:
        """ALFWorld-style admissible commands for the current state, sorted."""
        w = self.world
        assert w is not None
        acts = [f"go to {r}" for r in w.receptacles if r != w.location]
        acts += ["inventory", "look"]
        here = w.location
        if w.holding:
            acts.append(f"examine {w.holding}")
        if here is not None:
            acts.append(f"examine {here}")
            if w.openable(here):
                acts.append(f"{'close' if w.is_open[here] else 'open'} {here}")
            if w.holding is not None:
                acts += [f"{v} {w.holding} with {here}" for v, a in APPLIANCES.items() if a == kind_of(here)]
            if w.accessible(here):
                items = w.contents[here]
                if w.holding is None:
                    acts += [f"take {o} from {here}" for o in items if kind_of(o) != LAMP]
                else:
                    acts.append(f"move {w.holding} to {here}")
                acts += [f"use {o}" for o in items if kind_of(o) == LAMP]
        return sorted(acts)

    def expert_action(self) -> str | None:
        assert self.world is not None and self.spec_task is not None
        return oracle_action(self.spec_task, self.world)
