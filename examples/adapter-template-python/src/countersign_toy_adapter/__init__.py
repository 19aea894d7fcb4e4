"""A Countersign adapter for **toy**, a framework whose human-in-the-loop primitive is a pause:
a step may stop with a question, and the application resumes the same step later with an answer.

That is the "resumed in place" shape (docs/SPEC.md 2.1): the kernel asks through the interrupt
object (:class:`ToyInterrupt`), the adapter turns the question into a toy pause, and the resumed
step runs the same call again, whose second pass finds the same pending request and takes the
held answer. Every decision stays the kernel's: policy, approvals, effects and receipts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

import countersign

FRAMEWORK = "toy"

__all__ = ["FRAMEWORK", "Done", "Paused", "ToyInterrupt", "step"]


class ToyInterrupt:
    """toy's pause as the kernel's interrupt: it answers a question with the answer the
    application resumed with (held for exactly the request it names), or pauses the run."""

    framework = FRAMEWORK
    # toy's resume carries no arguments: the kernel binds the answer to the request's hash.
    carries_approved_arguments = False

    def __init__(self) -> None:
        self._answers: dict[str, dict] = {}
        self.paused: Optional[dict] = None

    def resume_with(self, request_id: str, answer: dict) -> None:
        """Hold a human's answer (``{"decision": "approve"|"deny", "approver" | "approver_token",
        "note", "action_hash"}``, the hash being the one the person was shown) for
        ``request_id`` only. The approver is the one the application
        authenticated, never a name from the run's state."""
        self._answers[request_id] = answer

    def interrupt(self, pending: dict) -> Optional[dict]:
        answer = self._answers.pop(pending["request_id"], None)
        if answer is None:
            self.paused = pending
        return answer


@dataclass(frozen=True)
class Done:
    """The tool ran; ``value`` is what it returned."""

    value: Any


@dataclass(frozen=True)
class Paused:
    """The step paused on ``pending`` (the kernel request); ``refusal`` is the kernel's
    ``ApprovalRequired`` to raise if nobody answers."""

    pending: dict
    refusal: countersign.ApprovalRequired


def step(
    control: countersign.Control,
    interrupt: ToyInterrupt,
    run: str,
    action: str,
    arguments: dict,
    tool: Callable[[dict], Any],
) -> Union[Done, Paused]:
    """One toy step: the tool call ``action(arguments)`` of run ``run``, through the kernel.
    ``tool`` runs at most once, with the canonical arguments, only when policy (and, if
    needed, a human) allowed exactly this call. Every other refusal is raised as itself."""
    try:
        return Done(control.execute(action, arguments, tool, run=run).value)
    except countersign.ApprovalRequired as required:
        pending, interrupt.paused = interrupt.paused, None
        if pending is not None and pending["request_id"] == required.request_id:
            return Paused(pending, required)
        raise
