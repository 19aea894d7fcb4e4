"""The adapter conformance kit, for adapters written in Python.

This is the Rust kit (``countersign-conformance``; docs/SPEC.md part 2, docs/conformance.md)
with a Python object playing the adapter. The kit builds every case's world itself — a scratch
SQLite store, a manual clock, its policy (``kit.refund``: ``amount`` ≤ 500 allowed, ≤ 100000
needs approval, ≤ 200000 needs ``group:finance``, ≤ 300000 two distinct members of it, more is
denied; every other action is unknown), its identity provider, and an
``InterruptApprovalProvider`` around a counting proxy of your interrupt — and checks the
refusals, executor counts, receipts and approval states against the direct kernel path::

    from countersign import conformance

    report = conformance.run(MyAdapter(), relaunch=[sys.executable, __file__])
    print(report.text)
    assert report.ok

An adapter is any object with:

- ``framework`` (str) and ``shape``: ``"decided_before_invocation"`` or ``"resumed_in_place"``;
- ``interrupt(setup: Setup)``: the framework's interrupt, an object with
  ``carries_approved_arguments`` (bool) and ``interrupt(pending: dict) -> Optional[dict]``
  (``None`` suspends; a dict is ``{"decision": "approve"|"reject", "approver", "note",
  "arguments"}``, whose ``approver`` is the one the operator passed on the resuming call);
- ``invoke(session: Session, action: str, arguments: dict, run: str)``: drive **one**
  protected call of the kit's run ``run`` through the real framework. ``run`` is the kit's
  label for a framework run (calls of one case share one unless the case labels them
  otherwise): map it to your own per-run id (keep the mapping in ``session.scratch_dir`` so
  another process finds it) and scope the run's requests to it (``Gate.run(run_id=...)``), so
  one run's approval never authorizes another run's call. A scripted model emits the call;
  the tool's body is ``session.run_tool``. Ask ``session.review`` whenever the framework
  shows a human something. Return the executor's value; let a kernel refusal raise as the ``countersign``
  exception the kernel raised (it carries the kernel's error back to the kit unchanged); when
  the framework paused, raise ``session.paused(request_id)``;
- optionally ``resume(session, action, arguments, run)`` (continue a run paused by an earlier
  ``invoke``, possibly in another process) and ``not_applicable(suite, case) -> Optional[str]``.

Who answered: ``session.review`` returns ``approver`` (a bare name; ``approver_token`` instead
for a token), the identity the operator's application passes **on the resuming call** — hand
exactly that to the kernel (``Gate.approve(..., approver=...)``, or your interrupt's answer) —
and ``payload_approver``, the name your framework's resume payload or saved run state carries,
for display. Write ``payload_approver`` where your payload keeps a name, and never hand it to
the kernel: the ``entitlement`` suite edits it to name an entitled approver while the operator
passed someone who is not, and a resume value replayed from a checkpoint carries no identity at
all (a quorum's second approver must be asked).

``relaunch`` is the command line that runs this same adapter's kit again: the durability case
pauses in one process, answers with ``countersign approve`` and resumes in another.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Union

from . import Control
from . import _native

if not hasattr(_native, "run_adapter_kit"):
    raise ImportError(
        "countersign.conformance: this countersign wheel was built without the adapter "
        "conformance kit; build one with it for your adapter's tests: `maturin build "
        "--features conformance` in crates/countersign-python (the repository's test scripts do)"
    )

__all__ = ["Report", "Session", "Setup", "run"]


@dataclass(frozen=True)
class Report:
    """The kit's report: ``ok`` (at least one applicable suite and no failure), the text report
    (``text``; its last line is ``<framework>: passed/applicable (k not applicable)``) and the
    same as a dict (``data``)."""

    ok: bool
    text: str
    data: dict


def _shown_json(shown: dict) -> str:
    return json.dumps(
        {
            "request_id": shown.get("request_id"),
            "action": shown["action"],
            "arguments": shown.get("arguments"),
            "expires_at": shown.get("expires_at"),
        }
    )


class Setup:
    """What the kit hands ``adapter.interrupt``: the world's scripted human and a folder for
    framework checkpoints."""

    def __init__(self, native: Any) -> None:
        self._native = native

    def review(self, shown: dict) -> Optional[dict]:
        """Show the human ``{"request_id", "action", "arguments", "expires_at"}``; their answer
        (``{"decision", "approver", "approver_token", "payload_approver", "note", "request_id",
        "arguments", "action_hash"}``) or ``None``. ``approver`` is who the operator passes on
        the resuming call; ``payload_approver`` is only what the run state says."""
        text = self._native.review(_shown_json(shown))
        return None if text is None else json.loads(text)

    @property
    def scratch_dir(self) -> str:
        return os.fspath(self._native.scratch_dir)


class Session(Setup):
    """What the kit hands ``adapter.invoke`` for one case's world."""

    def __init__(self, native: Any) -> None:
        super().__init__(native)
        self._control: Optional[Control] = None

    @property
    def control(self) -> Control:
        """The kit's kernel (built by the kit, as an operator would): use it as the adapter's
        ``Control``; never build another."""
        if self._control is None:
            self._control = Control._adopt(self._native.control())
        return self._control

    @property
    def interrupt(self) -> Any:
        """The object ``adapter.interrupt`` returned for this world."""
        return self._native.interrupt

    def run_tool(self, arguments: dict) -> Any:
        """The kit's executor: the tool's body, run with the canonical arguments the kernel
        handed over. Raises ``countersign.NotExecuted``, or ``RuntimeError`` (outcome unknown),
        when the case scripts a failure."""
        return json.loads(self._native.run_tool(json.dumps(arguments)))

    def paused(self, request_id: str) -> BaseException:
        """The kernel's ``ApprovalRequired`` for ``request_id``, to raise when the framework
        paused on it. ``ValueError`` when that request is not pending."""
        return self._native.paused(request_id)


class _Bridge:
    """Adapts a Python adapter to the native kit's calling convention (JSON text, native
    handles)."""

    def __init__(self, adapter: Any) -> None:
        missing = [
            name
            for name, callable_ in (
                ("framework", False),
                ("shape", False),
                ("interrupt", True),
                ("invoke", True),
            )
            if not hasattr(adapter, name) or (callable_ and not callable(getattr(adapter, name)))
        ]
        if missing:
            raise TypeError(
                f"{type(adapter).__name__} is not an adapter the kit can run: it lacks "
                + ", ".join(f"`{name}`" for name in missing)
                + " (see the countersign.conformance module documentation)"
            )
        self._adapter = adapter
        self.framework = adapter.framework
        self.shape = adapter.shape
        if hasattr(adapter, "resume"):
            self.resume = self._resume
        if hasattr(adapter, "not_applicable"):
            self.not_applicable = adapter.not_applicable

    def interrupt(self, setup: Any) -> Any:
        return _Interrupt(self._adapter.interrupt(Setup(setup)))

    def invoke(self, session: Any, action: str, arguments_json: str, run: str) -> str:
        value = self._adapter.invoke(Session(session), action, json.loads(arguments_json), run)
        return json.dumps(value)

    def _resume(self, session: Any, action: str, arguments_json: str, run: str) -> str:
        value = self._adapter.resume(Session(session), action, json.loads(arguments_json), run)
        return json.dumps(value)


class _Interrupt:
    def __init__(self, inner: Any) -> None:
        for name in ("carries_approved_arguments", "interrupt"):
            if not hasattr(inner, name):
                # Never read as "false": that would make the `binding` suite not applicable.
                raise TypeError(
                    f"the interrupt {type(inner).__name__} lacks `{name}`: an interrupt has "
                    "`carries_approved_arguments` (bool) and `interrupt(pending)`"
                )
        self.inner = inner
        self.carries_approved_arguments = bool(inner.carries_approved_arguments)

    def interrupt(self, pending_json: str) -> Optional[str]:
        answer = self.inner.interrupt(json.loads(pending_json))
        return None if answer is None else json.dumps(answer)


def run(
    adapter: Any,
    *,
    relaunch: Sequence[str],
    cli: Union[str, "os.PathLike[str]", None] = None,
    policy: Optional[str] = None,
) -> Report:
    """Run every case of the kit against ``adapter`` and report.

    Args:
        adapter: the adapter (see the module documentation).
        relaunch: the command line that runs this adapter's kit again in a fresh process (for
            example ``[sys.executable, __file__]``). When the kit starts it for the durability
            case, :func:`run` runs that process's phase and exits it.
        cli: the ``countersign`` command (default: ``$COUNTERSIGN_BIN``, else on ``PATH``).
        policy: a policy text to run under instead of the kit's (it must decide the kit's
            actions as the kit's does, in enforce mode).

    Raises:
        RuntimeError: the kit cannot run at all (an observe-mode or wrongly shaped policy, an
            unusable scratch folder). A failing case is not an error: read ``Report.ok``.
    """
    ok, text, data = _native.run_adapter_kit(
        _Bridge(adapter), list(relaunch), None if cli is None else os.fspath(cli), policy
    )
    return Report(ok=ok, text=text, data=json.loads(data))
