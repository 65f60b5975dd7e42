"""A ChatML chat template that renders tool calls and tool results, for tokenizers whose own template does not.

RL engines that let a model act through tools (TRL's `GRPOTrainer` with `environment_factory`,
`proctor.integrations.trl`) need a chat template that renders a whole tool-calling exchange
(user → assistant with `tool_calls` → tool), is prefix-preserving (a conversation renders as a prefix of the
same conversation with more turns), and a `response_template` that parses the model's tool calls back out of
its text (transformers' response parsing, ≥ 5.13).

proctor's tiny models (`proctor.models.build_tiny`) ship plain ChatML, which renders only `message['content']`:
the tool call of an assistant turn is dropped. SmolLM2-Instruct's template is the same ChatML with a default
system turn, and fails the same way (`trl.chat_template_utils.supports_tool_calling` is False for both).
`enable_tool_calling(tokenizer)` gives any ChatML tokenizer (`<|im_start|>`/`<|im_end|>` in its vocabulary)
`TOOL_CHAT_TEMPLATE` and `TOOL_RESPONSE_TEMPLATE`:

    <|im_start|>system
    <system text>

    You can call these tools:
    {"type": "function", "function": {"name": "act", ...}}
    To call a tool, reply with <tool_call>{"name": <tool name>, "arguments": {<argument>: <value>}}</tool_call>.
    The result of each call comes back in a tool turn.<|im_end|>
    <|im_start|>user
    ...<|im_end|>
    <|im_start|>assistant
    <tool_call>{"name": "act", "arguments": {"command": "go to fridge 1"}}</tool_call><|im_end|>
    <|im_start|>tool
    You arrive at fridge 1. ...<|im_end|>
    <|im_start|>assistant

Without tools it renders exactly like plain ChatML (`proctor.models.CHAT_TEMPLATE`), so proctor's own trainers
and the prompt renderer see the same text as before. A model must still learn to write the `<tool_call>` line:
an instruct model that was never trained on this format needs a short SFT first (the test of
`proctor.integrations.trl` does one on the tiny model).

This module imports no model library; it only sets two attributes of the tokenizer it is given.
"""

from __future__ import annotations

from typing import Any

IM_START, IM_END = "<|im_start|>", "<|im_end|>"
TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"

#: the line after the tool list in the system turn (what the model is told about the call syntax); it has no
#: single quote, so that `repr` writes it as a Jinja string literal
TOOL_INSTRUCTIONS = (
    'To call a tool, reply with <tool_call>{"name": <tool name>, "arguments": {<argument>: <value>}}</tool_call>. '
    "The result of each call comes back in a tool turn."
)

#: ChatML with tools: the tool list goes in the system turn, an assistant turn's tool calls follow its content
#: as one `<tool_call>{json}</tool_call>` each, and a tool result is its own `tool` turn (so every turn renders
#: independently of the turns after it: the template is prefix-preserving). The assistant's text, up to and
#: including its `<|im_end|>`, is inside `{% generation %}` markers, for trainers that mask the loss to the
#: assistant's tokens (`return_assistant_tokens_mask`)
TOOL_CHAT_TEMPLATE = (
    "{%- set ns = namespace(start=0) %}"
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages and messages[0]['role'] == 'system' %}"
    "{{- messages[0]['content'] + '\\n\\n' }}{%- set ns.start = 1 %}"
    "{%- endif %}"
    "{{- 'You can call these tools:\\n' }}"
    "{%- for tool in tools %}{{- (tool | tojson) + '\\n' }}{%- endfor %}"
    "{{- " + repr(TOOL_INSTRUCTIONS) + " + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages[ns.start:] %}"
    "{%- if message['role'] == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' }}{%- generation %}{{- message['content'] or '' }}"
    "{%- for call in message.get('tool_calls') or [] %}"
    "{%- set fn = call['function'] if call.get('function') is not none else call %}"
    "{%- if fn['arguments'] is string %}{%- set args = fn['arguments'] %}"
    "{%- else %}{%- set args = fn['arguments'] | tojson %}{%- endif %}"
    "{{- '<tool_call>{\"name\": ' + (fn['name'] | tojson) + ', \"arguments\": ' + args + '}</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>' }}{%- endgeneration %}{{- '\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + (message['content'] or '') + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

#: transformers' declarative response parser for `TOOL_CHAT_TEMPLATE` (`tokenizer.parse_response`): the text of
#: the last assistant turn is its content, each `<tool_call>{json}</tool_call>` one function call
TOOL_RESPONSE_TEMPLATE: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "tool_calls": {
            "open": TOOL_CALL_OPEN,
            "close_pattern": r"</tool_call>\s*",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close_pattern": r"<\|im_end\|>\s*", "content": "text"},
    },
}


def is_chatml(tokenizer: Any) -> bool:
    """Whether `tokenizer` has ChatML's turn markers as tokens of their own, with `<|im_end|>` as its EOS."""
    vocab = tokenizer.get_vocab()
    return IM_START in vocab and IM_END in vocab and tokenizer.eos_token == IM_END


def enable_tool_calling(tokenizer: Any) -> Any:
    """Give a ChatML `tokenizer` `TOOL_CHAT_TEMPLATE` and `TOOL_RESPONSE_TEMPLATE` (in place); returns it.

    A tokenizer of another family keeps its own template and is refused: write one for it (TRL ships
    templates for Qwen, Llama 3.x, Gemma and others, and sets their parsers itself)."""
    if not is_chatml(tokenizer):
        raise ValueError(
            f"tokenizer {getattr(tokenizer, 'name_or_path', '')!r} is not ChatML (<|im_start|>/<|im_end|> tokens, "
            "<|im_end|> as EOS); proctor's tool template fits ChatML tokenizers only"
        )
    tokenizer.chat_template = TOOL_CHAT_TEMPLATE
    tokenizer.response_template = TOOL_RESPONSE_TEMPLATE
    return tokenizer
