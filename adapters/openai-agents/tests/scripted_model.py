"""A scripted model for offline tests: implements the SDK's ``Model`` interface and answers
from a script instead of calling an API (no network, no API key).

The script is a list of turns; each turn is a list of :class:`Call`. The model finds its place
from the conversation it is given, so a run resumed in another process (with a fresh model
built from the same script) continues where the first one paused: it emits the first turn whose
call ids are not yet in the input, and once every scripted call has a result it answers with a
final message listing the results it saw.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)


@dataclass(frozen=True)
class Call:
    """One tool call the model will emit. ``arguments`` as a ``dict`` is sent as its JSON text;
    as a ``str`` it is sent as written (raw JSON text, for example with a key twice)."""

    name: str
    arguments: dict | str
    call_id: str


def _field(item: Any, key: str) -> Any:
    if isinstance(item, dict):
        return item.get(key)
    return getattr(item, key, None)


@dataclass
class ScriptedModel(Model):
    turns: list[list[Call]]
    seen_inputs: list[list[Any]] = field(default_factory=list)

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        given = kwargs.get("input", args[1] if len(args) > 1 else [])
        items = [] if isinstance(given, str) else list(given)
        self.seen_inputs.append(items)
        present = {
            _field(item, "call_id")
            for item in items
            if _field(item, "type") == "function_call"
        }
        for turn in self.turns:
            if not all(call.call_id in present for call in turn):
                output: list[Any] = [
                    ResponseFunctionToolCall(
                        id=f"fc_{call.call_id}",
                        call_id=call.call_id,
                        name=call.name,
                        arguments=call.arguments
                        if isinstance(call.arguments, str)
                        else json.dumps(call.arguments),
                        type="function_call",
                        status="completed",
                    )
                    for call in turn
                ]
                return ModelResponse(output=output, usage=Usage(), response_id=None)
        results = {
            _field(item, "call_id"): _field(item, "output")
            for item in items
            if _field(item, "type") == "function_call_output"
        }
        text = "done: " + json.dumps(results, sort_keys=True, default=str)
        message = ResponseOutputMessage(
            id="msg_final",
            content=[ResponseOutputText(annotations=[], text=text, type="output_text")],
            role="assistant",
            status="completed",
            type="message",
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the scripted model does not stream")
