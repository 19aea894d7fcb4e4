"""A scripted LangChain chat model: each model call returns the scripted AI message for its place
in the conversation (tool calls or a final text), offline. The place is the number of AI
messages since the last human message, so a resumed run in a new process (a new model
instance) gets the turn it would have had. ``bind_tools`` returns the model itself."""

from __future__ import annotations

from typing import Any, Optional

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult


def call(name: str, args: dict, call_id: str) -> dict:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


class ScriptedChatModel(BaseChatModel):
    """``turns``: a list; each item a list of tool calls (see :func:`call`) or a string (the
    final answer). After the script ends it answers "done"."""

    turns: list
    position: int = 0
    seen: list = []

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedChatModel":
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Optional[list[str]] = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self.seen.append(list(messages))
        place = 0
        for message in reversed(messages):
            if getattr(message, "type", None) == "human":
                break
            if getattr(message, "type", None) == "ai":
                place += 1
        self.position = place
        turn = self.turns[place] if place < len(self.turns) else "done"
        if isinstance(turn, str):
            message = AIMessage(content=turn)
        else:
            message = AIMessage(content="", tool_calls=list(turn))
        return ChatResult(generations=[ChatGeneration(message=message)])
