"""The agent registry: every agent kind has a pydantic config, and `make_agent` builds one from it.

    make_agent({"kind": "mixture", "components": [{"agent": {"kind": "expert"}, "weight": 0.7},
                                                  {"agent": {"kind": "random"}, "weight": 0.3}]})
    make_agent("epsilon", epsilon=0.3)          # the oracle, a random admissible action at rate 0.3

A new kind is one config class with a `build()` method, registered with `@register_agent("name")` in `KINDS`
(a `proctor.registry.Registry`).
Configs nest (a mixture's components are agent configs), so YAML files and `--agent-arg` can name any
combination. `agent_kinds()` (and so the CLI's help) is derived from this registry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from proctor.agents.base import Agent
from proctor.envs.experts import all_expert_kinds
from proctor.prompts.render import PromptConfig
from proctor.registry import Registry

#: where a local model runs (`proctor.models.loading.resolve_device`)
Device = Annotated[str, Field(description="auto (CUDA when torch sees one, else cpu), cpu, cuda:1, ...")]
#: the dtype a local model is loaded in for inference (`proctor.models.loading.inference_dtype`)
Dtype = Annotated[str | None, Field(description="auto (bf16 on a CUDA GPU with bf16, else float32), a torch "
                                    "dtype name, or null (the checkpoint's)")]


class AgentSpec(BaseModel):
    """Base of every agent config: `kind` names the registry entry, `build()` makes the agent."""

    model_config = ConfigDict(extra="forbid")

    kind: str = Field(description="the agent kind: a name in the agent registry (`proctor rollout --help` lists "
                      "them), which selects the config's other fields")

    def build(self) -> Agent:
        raise NotImplementedError


#: the agent kinds by name: their config classes
KINDS = Registry[type[AgentSpec]]("agent kind")


def register_agent(kind: str, description: str = "") -> Callable[[type[AgentSpec]], type[AgentSpec]]:
    """Class decorator: register an `AgentSpec` subclass as agent `kind`."""

    def deco(cls: type[AgentSpec]) -> type[AgentSpec]:
        cls.description = description or next(iter((cls.__doc__ or "").strip().splitlines()), kind)
        return KINDS.add(kind, cls)

    return deco


def agent_kinds() -> dict[str, str]:
    """The registered kinds with their one-line descriptions."""
    return {k: cls.description for k, cls in KINDS.sorted().items()}


def agent_class(kind: str) -> type[AgentSpec] | None:
    """The config class of a registered agent kind (None for an unknown one)."""
    return KINDS.get(kind)


def agent_config(data: AgentSpec | Mapping[str, Any] | str) -> AgentSpec:
    """Validate an agent config (a dict with `kind`, a kind name, or a config already made)."""
    if isinstance(data, AgentSpec):
        return data
    if isinstance(data, str):
        data = {"kind": data}
    if not isinstance(data, Mapping) or "kind" not in data:
        raise ValueError(f"an agent config needs a 'kind' (one of {', '.join(KINDS.names())}), got {data!r}")
    return KINDS[data["kind"]].model_validate(dict(data))


def make_agent(config: AgentSpec | Mapping[str, Any] | str, /, **kwargs: Any) -> Agent:
    """Build an agent from a config, or from a kind name plus its fields as keyword arguments."""
    if kwargs:
        if not isinstance(config, str):
            raise TypeError("make_agent: keyword arguments go with a kind name, not with a config")
        config = {"kind": config, **kwargs}
    try:
        spec = agent_config(config)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        raise ValueError(f"agent config: field '{loc}': {first['msg']}") from None
    return spec.build()


#: a nested agent config (a dict or a kind name in YAML)
AgentConfig = Annotated[AgentSpec, BeforeValidator(agent_config)]


def _known_expert(kind: str) -> str:
    import proctor.envs  # noqa: F401  (registers the built-in envs' experts)

    if kind not in all_expert_kinds():
        raise ValueError(f"unknown expert {kind!r}; registered: {', '.join(all_expert_kinds())}")
    return kind


# -- the built-in kinds -----------------------------------------------------------------------------
@register_agent("expert")
class ExpertConfig(AgentSpec):
    """A scripted expert of the env (`oracle` reads the env's privileged hint)."""

    kind: Literal["expert"] = Field(default="expert", description="the agent kind (selects this config)")
    expert: str = Field(default="oracle", description="oracle, or an env's registered expert (household: search)")

    @field_validator("expert")
    @classmethod
    def _known(cls, v: str) -> str:
        return _known_expert(v)

    def build(self) -> Agent:
        from proctor.agents.experts import ExpertAgent

        return ExpertAgent(self.expert)


@register_agent("random")
class RandomConfig(AgentSpec):
    """Uniform over the admissible actions (or `fallback_actions` when the env lists none)."""

    kind: Literal["random"] = Field(default="random", description="the agent kind (selects this config)")
    seed: int = Field(default=0, description="with the prefix's task, sample and step, seeds each draw: the same "
                      "prefix gets the same action in every run")
    fallback_actions: list[str] | None = Field(default=None, description="the actions to draw from when the env "
                                               "lists no admissible ones (None: the env's candidate actions)")

    def build(self) -> Agent:
        from proctor.agents.simple import RandomAgent

        return RandomAgent(seed=self.seed, fallback_actions=self.fallback_actions)


@register_agent("replay")
class ReplayConfig(AgentSpec):
    """The actions of stored trajectories again, matched by (env, task, sample)."""

    kind: Literal["replay"] = Field(default="replay", description="the agent kind (selects this config)")
    source: str = Field(description="a trajectory store directory")
    check_observations: bool = Field(default=True, description="stop with an error when the env's observation "
                                     "differs from the recorded one (the env diverged from the recording)")

    def build(self) -> Agent:
        from proctor.agents.simple import ReplayAgent
        from proctor.store import TrajectoryStore

        return ReplayAgent(TrajectoryStore.open(self.source), check_observations=self.check_observations)


_STOP_HELP = ("stop strings; None: the output format's end of action (plain: a newline; reason_action and "
              "thought_action: a blank line; xml: `</action>`); []: none")


@register_agent("hf")
class HFConfig(AgentSpec):
    """A local Hugging Face causal LM (batched generation, prefix KV cache)."""

    kind: Literal["hf"] = Field(default="hf", description="the agent kind (selects this config)")
    model: str = Field(description="model folder or hub name")
    prompt: PromptConfig = Field(default_factory=PromptConfig, description="how states are rendered as the "
                                 "model's prompt and its output parsed")
    temperature: float = Field(default=1.0, ge=0, description="sampling temperature; 0: greedy decoding")
    top_p: float = Field(default=1.0, gt=0, le=1, description="nucleus sampling: keep the most likely tokens up to "
                         "this probability mass; 1: all")
    top_k: int = Field(default=0, ge=0, description="sample among the k most likely tokens only; 0: no limit")
    max_new_tokens: int = Field(default=48, ge=1, description="most tokens generated per action")
    stop: list[str] | None = Field(default=None, description=_STOP_HELP)
    seed: int | None = Field(default=0, description="with the rows' task, sample, step and episode seed, seeds "
                             "each generate call, so the same prefixes give the same samples in any run; None: "
                             "unseeded")
    batch_size: int | None = Field(default=None, ge=1, description="most prompts per generate call (None: all of "
                                   "a call's prompts at once); lower it when memory runs out")
    device: Device = "auto"
    dtype: Dtype = "auto"
    prefix_cache: int = Field(default=64, ge=0, description="keep the KV caches of this many most recent "
                              "episodes and reuse it at their next step; 0: off")

    def build(self) -> Agent:
        from proctor.agents.hf import HFAgent

        return HFAgent(self.model, prompt=self.prompt, temperature=self.temperature, top_p=self.top_p,
                       top_k=self.top_k, max_new_tokens=self.max_new_tokens, stop=self.stop, seed=self.seed,
                       batch_size=self.batch_size, device=self.device, dtype=self.dtype,
                       prefix_cache=self.prefix_cache)


@register_agent("openai")
class OpenAIConfig(AgentSpec):
    """A model behind an OpenAI-compatible server (vLLM, SGLang, `proctor serve`)."""

    kind: Literal["openai"] = Field(default="openai", description="the agent kind (selects this config)")
    model: str = Field(description="the model name the server serves it under")
    base_url: str = Field(description="e.g. http://127.0.0.1:8000/v1")
    api_key_env: str = Field(default="OPENAI_API_KEY", description="environment variable holding the API key "
                             "(unset: 'EMPTY', as local servers expect); the key itself is never in a config")
    endpoint: Literal["chat", "completions"] = Field(default="chat", description="chat: send the messages (the "
                                                     "server applies its chat template); completions: render the "
                                                     "prompt here with `tokenizer` and send the text")
    prompt: PromptConfig = Field(default_factory=PromptConfig, description="how states are rendered as the "
                                 "model's prompt and its output parsed")
    temperature: float = Field(default=1.0, ge=0, description="sampling temperature; 0: greedy (one completion "
                               "repeated n times)")
    top_p: float = Field(default=1.0, gt=0, le=1, description="nucleus sampling: keep the most likely tokens up to "
                         "this probability mass; 1: all")
    max_tokens: int = Field(default=256, ge=1, description="most tokens generated per action")
    stop: list[str] | None = Field(default=None, description=_STOP_HELP)
    concurrency: int = Field(default=8, ge=1, description="requests in flight at once (one per prefix)")
    timeout: float = Field(default=60.0, gt=0, description="seconds before a request counts as timed out (and is "
                           "retried)")
    max_retries: int = Field(default=5, ge=0, description="retries of a request after a connection error, a "
                             "timeout or HTTP 408/409/429/5xx, with exponential back-off; then the agent fails")
    seed: int | None = Field(default=0, description="with the prefix's task, sample, step and episode seed, the "
                             "seed sent with each request (a re-run sends the same); None: none sent")
    tokenizer: str | None = Field(default=None, description="the model's tokenizer (folder or hub name): the "
                                  "completions endpoint renders the prompt with it")
    return_token_ids: bool = Field(default=True, description="ask for the generated token ids (vLLM's "
                                   "return_token_ids; RL needs them); false for servers that refuse it")

    def build(self) -> Agent:
        from proctor.agents.openai_agent import OpenAIAgent

        return OpenAIAgent(self.base_url, self.model, api_key_env=self.api_key_env, endpoint=self.endpoint,
                           prompt=self.prompt, temperature=self.temperature, top_p=self.top_p,
                           max_tokens=self.max_tokens, stop=self.stop, concurrency=self.concurrency,
                           timeout=self.timeout, max_retries=self.max_retries, seed=self.seed,
                           tokenizer=self.tokenizer, return_token_ids=self.return_token_ids)


class ServerRef(BaseModel):
    """A model served by vLLM (or another OpenAI-compatible server with `prompt_logprobs`)."""

    model_config = ConfigDict(extra="forbid")

    base_url: str = Field(description="e.g. http://127.0.0.1:8000/v1")
    model: str | None = Field(default=None, description="the served model name (None: the server's only base model)")
    api_key_env: str = Field(default="OPENAI_API_KEY", description="environment variable holding the API key")
    rows_per_request: int = Field(default=8, ge=1, description="(state, action) rows scored per request (1 "
                                  "against vLLM's CPU build with LoRA enabled)")
    concurrency: int = Field(default=2, ge=1, description="requests in flight at once")
    pooling: bool = Field(default=False, description="a PRM head served by vLLM's pooling runner, scored by its "
                          "/pooling endpoint with the PRM folder's tokenization (proctor.prm.pooling); false: a PRM "
                          "head is on `proctor prm serve` (give its root URL)")

    def client(self) -> Any:
        from proctor.agents.served_logprobs import ServedLogprobs

        return ServedLogprobs(self.base_url, self.model, api_key_env=self.api_key_env,
                              rows_per_request=self.rows_per_request, concurrency=self.concurrency)


class MixtureComponent(BaseModel):
    """One agent of a mixture and its share of the samples."""

    model_config = ConfigDict(extra="forbid")

    agent: AgentConfig = Field(description="the component's agent config")
    weight: float = Field(gt=0, description="its share of each state's samples, relative to the other components' "
                          "weights")


@register_agent("mixture")
class MixtureConfig(AgentSpec):
    """A step's samples split across agents by weight (AgentPRM's mixture of policies)."""

    kind: Literal["mixture"] = Field(default="mixture", description="the agent kind (selects this config)")
    components: list[MixtureComponent] = Field(min_length=1, description="the agents and their weights: a state's "
                                               "n samples are split between them in proportion")
    seed: int | None = Field(default=0, description="seeds the split of the remainder samples per (task, sample, "
                             "step); None: the largest remainders, deterministically")

    def build(self) -> Agent:
        from proctor.agents.composite import MixtureAgent

        return MixtureAgent([(c.agent.build(), c.weight) for c in self.components], seed=self.seed)


@register_agent("epsilon")
class EpsilonExpertConfig(AgentSpec):
    """An expert that takes a random admissible action instead at rate epsilon (ε-greedy exploration)."""

    kind: Literal["epsilon"] = Field(default="epsilon", description="the agent kind (selects this config)")
    expert: str = Field(default="oracle", description="oracle, or an env's registered expert (household: search)")
    epsilon: float = Field(default=0.3, ge=0, le=1, description="the share of samples drawn uniformly from the "
                           "admissible actions instead of the expert's; 0: the expert alone, 1: random alone")
    seed: int = Field(default=0, description="seeds the random actions and the expert/random split")

    @field_validator("expert")
    @classmethod
    def _known(cls, v: str) -> str:
        return _known_expert(v)

    def build(self) -> Agent:
        from proctor.agents.composite import MixtureAgent
        from proctor.agents.experts import ExpertAgent
        from proctor.agents.simple import RandomAgent

        if self.epsilon == 0:
            return ExpertAgent(self.expert)
        if self.epsilon == 1:
            return RandomAgent(seed=self.seed)
        return MixtureAgent([(ExpertAgent(self.expert), 1 - self.epsilon), (RandomAgent(seed=self.seed), self.epsilon)],
                            seed=self.seed)


@register_agent("switch")
class SwitchConfig(AgentSpec):
    """Roll in with one agent, switch to another at a random (or given) step."""

    kind: Literal["switch"] = Field(default="switch", description="the agent kind (selects this config)")
    roll_in: AgentConfig = Field(description="the agent that acts before the switch step")
    roll_out: AgentConfig = Field(description="the agent that acts from the switch step on")
    switch_prob: float | None = Field(default=None, gt=0, le=1, description="switch at each step with this "
                                      "probability (the switch step is geometric); give this or switch_steps")
    switch_steps: int | list[int] | dict[int, float] | None = Field(default=None, description="the switch step: "
                                                                    "a step, uniform over a list of steps, or drawn "
                                                                    "from a {step: weight} mapping")
    seed: int = Field(default=0, description="seeds the switch step, drawn once per (task, sample)")

    @model_validator(mode="after")
    def _one_rule(self) -> SwitchConfig:
        if (self.switch_prob is None) == (self.switch_steps is None):
            raise ValueError("give exactly one of switch_prob and switch_steps")
        return self

    def build(self) -> Agent:
        from proctor.agents.composite import SwitchAgent

        return SwitchAgent(self.roll_in.build(), self.roll_out.build(), switch_prob=self.switch_prob,
                           switch_steps=self.switch_steps, seed=self.seed)


@register_agent("choice")
class ChoiceConfig(AgentSpec):
    """A local HF causal LM choosing among the admissible actions by their log-likelihood (constrained)."""

    kind: Literal["choice"] = Field(default="choice", description="the agent kind (selects this config)")
    model: str = Field(description="model folder or hub name")
    prompt: PromptConfig = Field(default_factory=PromptConfig, description="how states are rendered as the "
                                 "model's prompt (and a generated action parsed)")
    temperature: float = Field(default=1.0, ge=0, description="softmax temperature over the actions; 0: greedy")
    seed: int | None = Field(default=0, description="with the prefix's task, sample, step and episode seed, seeds "
                             "the draw among the actions (policies with the same seed share its noise)")
    batch_size: int | None = Field(default=None, ge=1, description="most (state, action) rows per forward pass")
    device: Device = "auto"
    dtype: Dtype = "auto"
    max_new_tokens: int = Field(default=48, ge=1, description="for states without an admissible list (generated)")
    server: ServerRef | None = Field(default=None, description="score on this vLLM server (prompt_logprobs); "
                                     "`model` then gives only the tokenizer")

    def build(self) -> Agent:
        from proctor.agents.choice import ChoiceAgent

        return ChoiceAgent(self.model, prompt=self.prompt, temperature=self.temperature, seed=self.seed,
                           batch_size=self.batch_size, device=self.device, dtype=self.dtype,
                           max_new_tokens=self.max_new_tokens,
                           server=self.server.client() if self.server is not None else None)
