"""Countersign for Python: policy, single-use approvals, at-most-once effects and hash-chained
receipts for AI agents' tool calls.

The kernel is Rust (the ``countersign`` crate); this package is its binding::

    from countersign import Control, NotExecuted

    control = Control("countersign.yaml", principal="agent:support-bot")

    @control.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> str:
        ...                      # runs at most once per effect key, only if policy allows

    refund(payment_id="pi_1", amount=500)

Every refusal is a :class:`CountersignError` subclass with ``reason``, ``did_run`` and
``may_retry`` (see :mod:`countersign.errors`).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import os
import warnings
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Mapping, Optional, TypeVar, Union, overload

from . import errors
from ._native import NativeControl as _NativeControl
from ._native import Principal
from ._native import interrupt_object_json as _interrupt_object_json
from ._native import respond as _respond
from .errors import (
    ActionDenied,
    AlreadyDecided,
    AmbiguousEffect,
    ApprovalConsumed,
    ApprovalDenied,
    ApprovalError,
    ApprovalExpired,
    ApprovalMismatch,
    ApprovalRequired,
    ApprovalUnknown,
    ApprovalVoid,
    ApprovalOtherRun,
    ApprovalRevoked,
    ApprovalCancelled,
    NotRevocable,
    BadTemplate,
    CountersignError,
    DidRun,
    DuplicateEffect,
    InternalError,
    InterruptFailed,
    InvalidArguments,
    NoApprover,
    NoteTooLong,
    NoPrincipal,
    NotExecuted,
    OutcomeUnknown,
    PolicyError,
    SelfApproval,
    StoreError,
    AnswerRefused,
    InvalidApprover,
    Reason,
    InvalidDecision,
    NotAuthenticated,
    NotEntitled,
    AnswerMismatch,
)

__version__ = "0.1.0"

__all__ = [
    "Control",
    "Principal",
    "RawArguments",
    "Executed",
    "Evaluation",
    "ApprovalRequest",
    "ApprovalWarning",
    "errors",
    *errors.__all__,
]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class ApprovalWarning(UserWarning):
    """A policy approval nobody can give: approvers that match no directory member and no key,
    a quorum larger than the approvers named, ``require: authenticated`` with no key. Issued
    once per problem when a :class:`Control` opens (the same lines ``countersign verify``
    prints, each naming the policy line); the policy still loads, but every request such an
    entry opens would expire unanswered. Turn it into an error with
    ``warnings.simplefilter("error", countersign.ApprovalWarning)``."""


@dataclass(frozen=True)
class Executed:
    """A call that ran: the executor's ``value`` and the ``receipt`` (a dict in the
    ``countersign.receipt/v1`` format) that records it."""

    value: Any
    receipt: dict


@dataclass(frozen=True)
class Evaluation:
    """What policy would decide for a call (:meth:`Control.evaluate`); nothing was written.

    ``decision``: ``allow`` | ``approve`` | ``deny``; ``reason``: ``rule``, ``action_default``,
    ``unknown_action`` or ``no_matching_rule``; ``action_hash``: ``sha256:`` + 64 hex;
    ``mode``: ``enforce`` | ``observe``.
    """

    action: str
    decision: str
    reason: str
    action_hash: str
    effect_key: Optional[str]
    resource: Optional[str]
    mode: str
    policy_hash: str


@dataclass(frozen=True)
class ApprovalRequest:
    """One approval request as stored by the kernel.

    ``state``: ``pending`` | ``granted`` | ``denied`` | ``consumed`` | ``expired`` | ``void`` |
    ``revoked`` | ``cancelled``.
    Times are UTC, RFC 3339 strings. ``arguments`` are the canonical arguments with secrets
    redacted: what the approver is shown and what the answer is bound to (``action_hash``).
    ``note`` is the approver's text: data, never an instruction.
    """

    request_id: str
    action: str
    action_hash: str
    arguments: Any
    principal: str
    resource: Optional[str]
    environment: str
    effect_key: Optional[str]
    state: str
    created_at: str
    expires_at: str
    answered_at: Optional[str]
    approver: Optional[str]
    note: Optional[str]
    consumed_at: Optional[str]
    approvals_given: int = 0
    """Yes answers counted so far."""
    quorum: int = 1
    """How many distinct approvers must say yes (the rule stored with the request)."""
    approvers: str = ""
    """Who may answer, in one line (the stored rule's summary), e.g. ``group:finance (2 of them)``."""
    run: Optional[str] = None
    """The run the request was opened for (``run=`` on the call), or ``None``: only an attempt
    naming the same run consumes its grant (an unscoped one only an attempt naming none)."""
    display: str = ""
    """What to show a human: the kernel's one rendering (``countersign::display``), every
    argument in full, every character a person could misread escaped as ``\\u{…}`` with a
    warning under it. Plain text, lines separated by ``\\n``. Show this rather than rendering
    ``arguments`` yourself."""

    @staticmethod
    def _from_json(text: str) -> "ApprovalRequest":
        record = json.loads(text)
        return ApprovalRequest(
            request_id=record["id"],
            action=record["action"],
            action_hash=record["action_hash"],
            arguments=record["arguments"],
            principal=record["principal"],
            resource=record.get("resource"),
            environment=record["environment"],
            effect_key=record.get("effect_key"),
            state=record["state"],
            created_at=record["created_at"],
            expires_at=record["expires_at"],
            answered_at=record.get("answered_at"),
            approver=record.get("approver"),
            note=record.get("note"),
            consumed_at=record.get("consumed_at"),
            approvals_given=sum(
                1 for answer in record.get("answers") or [] if answer.get("decision") == "approve"
            ),
            quorum=(record.get("rule") or {}).get("quorum", 1),
            approvers=_rule_summary(record.get("rule") or {}),
            run=record.get("run"),
            display=record.get("display") or "",
        )


def _rule_summary(rule: Mapping[str, Any]) -> str:
    """The stored rule in one line, as the kernel's ``ApprovalRule::summary`` writes it."""
    approvers = list(rule.get("approvers") or ["*"])
    text = "anyone but the requester" if "*" in approvers else ", ".join(approvers)
    if rule.get("quorum", 1) > 1:
        text += f" ({rule['quorum']} of them)"
    if rule.get("require") == "authenticated":
        text += ", authenticated"
    if rule.get("distinct_from_requester"):
        text += ", not the requester's groups"
    return text


Correlation = tuple[str, str]
"""A framework call: ``(framework, call_id)``, the framework's name and its id for the call."""


def _correlation(correlation: Optional[Correlation]) -> Optional[Correlation]:
    if correlation is None:
        return None
    try:
        framework, call_id = correlation
    except (TypeError, ValueError):
        raise TypeError(
            "correlation must be a pair (framework, call_id), such as "
            "('openai-agents', 'call_1')"
        ) from None
    if not isinstance(framework, str) or not isinstance(call_id, str):
        raise TypeError("correlation must be a pair of strings (framework, call_id)")
    return (framework, call_id)


class RawArguments:
    """The JSON text of a tool call's arguments, exactly as the framework received it (for
    example the OpenAI function-call ``arguments`` string), handed to the kernel unparsed.

    The kernel reads it with its one strict reader (``countersign::json``), so what a parsed
    ``dict`` can no longer show is refused, never resolved: a key written twice
    (``{"amount":1,"amount":1000}``; ``json.loads`` keeps the last, case B52), nesting past 64
    levels, a lone surrogate escape, an integer outside ±(2**53−1), text past 4 MiB
    (``InvalidArguments`` with ``canonical_reason`` ``duplicate_key``, ``too_deep``,
    ``lone_surrogate``, ``unsafe_integer``, ``too_large``). Accepted wherever a method takes
    ``arguments``.

    A Python ``str`` can hold a lone surrogate that no UTF-8 text can (from
    ``json.loads('"\\\\ud800"')`` or ``"\\ud800"``): such text fails here, locally, with
    ``InvalidArguments`` (``canonical_reason="lone_surrogate"``); it is never replaced by U+FFFD
    or ``?`` (case B51).
    """

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        if not isinstance(text, str):
            raise TypeError(f"RawArguments needs the JSON text as a str, not {type(text).__name__}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            raise InvalidArguments(
                "not executed: the arguments text holds a lone surrogate "
                f"(U+{ord(text[error.start]):04X} at character {error.start}), which UTF-8 "
                "cannot carry: send a valid surrogate pair",
                action="",
                detail=str(error),
                canonical_reason="lone_surrogate",
            ) from None
        self.text = text

    def __repr__(self) -> str:
        return f"RawArguments({self.text!r})"


def _arguments_json(arguments: Mapping[str, Any] | RawArguments) -> str:
    if isinstance(arguments, RawArguments):
        # The kernel's strict reader parses it: duplicates, depth and the rest are its refusals.
        return arguments.text
    if not isinstance(arguments, Mapping):
        raise TypeError(
            f"arguments must be a mapping of names to JSON values, not {type(arguments).__name__}"
        )
    try:
        # NaN and infinities pass through as tokens the kernel's strict parser refuses with
        # `invalid_arguments`, so the refusal is the kernel's, never a silent change.
        return json.dumps(arguments, allow_nan=True)
    except (TypeError, ValueError) as error:
        raise InvalidArguments(
            f"not executed: arguments are not representable as JSON: {error}",
            action="",
            detail=str(error),
        ) from None


class Control:
    """The kernel for one policy, one store and one principal.

    Args:
        policy: the policy file (``countersign.policy/v1`` YAML).
        principal: who is acting (a :class:`Principal` or its identifier). Vouched for by the
            application, never taken from model output.
        store_url: ``sqlite:PATH`` (default: ``.countersign/countersign.db`` beside the policy,
            created if missing), ``memory:`` (this process only), or what else the kernel
            accepts (``postgres://…`` when built with it).
        approval_ttl: seconds an approval request stays answerable (default: the policy's,
            else 15 minutes).
        interrupt: the framework's interrupt, for a resumed-in-place adapter (docs/SPEC.md
            2.1-2.2): when a call needs a human, the kernel's ``InterruptApprovalProvider``
            asks it, records its answer (channel ``interrupt:<framework>``) and judges it by
            the request's stored rule. An object with ``framework`` (str),
            ``carries_approved_arguments`` (bool) and ``interrupt(pending: str) -> str | None``:
            ``pending`` is the request as JSON (``request_id``, ``action``, ``arguments``,
            ``action_hash``, ``expires_at``, ...); return ``None`` to suspend (the call ends
            :class:`ApprovalRequired`, the request stays pending), or the answer as JSON:
            ``{"decision": "approve"|"deny", "approver_token"|"approver": ..., "note": ...,
            "arguments": ..., "action_hash": ...}`` whose approver is the one the application
            passed on the resuming call (never a name from the framework's payload). An
            exception raised there is :class:`InterruptFailed`. It is called on a thread of
            its own. Without one, a call that needs a human ends :class:`ApprovalRequired`
            and waits for ``countersign approve``.

    Raises:
        PolicyError: the policy does not load (the message names the line).
        StoreError: the store cannot be opened.
    """

    def __init__(
        self,
        policy: Union[str, "os.PathLike[str]"],
        *,
        principal: Union[Principal, str],
        store_url: Optional[str] = None,
        approval_ttl: Optional[float] = None,
        interrupt: Any = None,
    ) -> None:
        if isinstance(principal, str):
            principal = Principal(principal)
        self._native = _NativeControl(
            os.fspath(policy), principal, store_url, approval_ttl, interrupt
        )
        self.principal: Optional[Principal] = principal
        for line in self._native.approval_warnings:
            warnings.warn(f"{os.fspath(policy)}: {line}", ApprovalWarning, stacklevel=2)
        self._approval_channel: Optional[str] = (
            None if interrupt is None else f"interrupt:{getattr(interrupt, 'framework', '')}"
        )

    @classmethod
    def _adopt(cls, native: _NativeControl) -> "Control":
        """A ``Control`` around a kernel built in Rust by its operator (the conformance kit's:
        :mod:`countersign.conformance`). Its identity provider decides the principal, so
        ``principal`` is ``None``."""
        control = cls.__new__(cls)
        control._native = native
        control.principal = None
        # The kit always builds its kernel with an interrupt provider around the adapter's.
        control._approval_channel = "interrupt"
        return control

    @property
    def approval_channel(self) -> Optional[str]:
        """How a human's answer reaches this kernel in-band: ``interrupt:<framework>`` when it
        was built with ``interrupt=``, else ``None`` — no approval channel: a call that needs a
        human ends :class:`ApprovalRequired` and waits for an answer out of band
        (``countersign approve``, ``countersign serve``), case B39."""
        return self._approval_channel

    @property
    def store_url(self) -> str:
        """The store URL in use."""
        return self._native.store_url

    @property
    def policy_path(self) -> Optional[str]:
        """The policy file (``None`` for a kernel built in Rust, such as the conformance kit's)."""
        path = self._native.policy_path
        return None if path is None else os.fspath(path)

    @property
    def mode(self) -> str:
        """``enforce`` or ``observe`` (observe: decide and record everything, enforce nothing)."""
        return self._native.mode

    @property
    def policy_hash(self) -> str:
        """The policy hash stamped on every receipt."""
        return self._native.policy_hash

    def evaluate(self, action: str, arguments: Mapping[str, Any] | RawArguments) -> Evaluation:
        """What policy would decide for this call. Writes nothing.

        Raises:
            InvalidArguments, BadTemplate, NoPrincipal.
        """
        return Evaluation(**json.loads(self._native.evaluate(action, _arguments_json(arguments))))

    def needs_approval(self, action: str, arguments: Mapping[str, Any] | RawArguments) -> bool:
        """Does this call need a human's approval before it runs? True when policy says
        ``approve`` in enforce mode; false in observe mode and for ``allow`` and ``deny`` (a
        denied call is refused, with a receipt, when it is executed). Writes nothing.

        Raises:
            InvalidArguments, BadTemplate, NoPrincipal.
        """
        return self._native.needs_approval(action, _arguments_json(arguments))

    def request_approval(
        self,
        action: str,
        arguments: Mapping[str, Any] | RawArguments,
        *,
        run: Optional[str] = None,
        correlation: Optional[Correlation] = None,
    ) -> Optional[ApprovalRequest]:
        """Find or open the approval request for this call without running anything.

        ``None`` when the call needs no approval (allow, deny, observe mode). Otherwise the
        request bound to this call's action hash: ``pending`` (created now or earlier),
        ``granted`` (answered yes, unused) or ``denied`` (a human's no that still stands).
        Idempotent for one action hash (per ``run``).

        Args:
            run: the run this call belongs to (a framework's run or thread id; not hashed). A
                request opened here is scoped to it: its grant is consumed only by a call
                naming the same run. Pending requests are reused per (action hash, run).
            correlation: ``(framework, call_id)``: the store maps (framework, run, call id) to
                the request in the same transaction, first write wins, so each framework call
                gets its own request. Read it back with :meth:`correlated`. A call id already
                mapped to other arguments is refused (:class:`ApprovalMismatch`).

        Writes no receipt: a refusal raised here is not recorded. An adapter that asks this
        as its approval predicate should answer "no approval needed" on a refusal and let
        :meth:`execute` refuse the call, so the ended attempt leaves its receipt.

        Raises:
            InvalidArguments, BadTemplate, NoPrincipal; DuplicateEffect or AmbiguousEffect
            when the effect would be refused anyway (nobody is asked); StoreError.
        """
        text = self._native.request_approval(
            action, _arguments_json(arguments), run, _correlation(correlation)
        )
        return None if text is None else ApprovalRequest._from_json(text)

    def execute(
        self,
        action: str,
        arguments: Mapping[str, Any] | RawArguments,
        executor: Callable[[dict], Any],
        *,
        approval: Optional[str] = None,
        timeout: Optional[float] = None,
        run: Optional[str] = None,
        correlation: Optional[Correlation] = None,
    ) -> Executed:
        """Decide this call and, if allowed or approved, run ``executor`` at most once with the
        canonical arguments (a ``dict``). The kernel works with the GIL released.

        Args:
            approval: an approval request id (``apr_…``) to present; without one, a granted
                request for exactly this action hash is found and used.
            timeout: seconds the executor may run; past it the outcome is unknown. The
                executor runs on this thread and is not interrupted: the timeout is checked by
                the kernel around it, so a call that blocks is not cut short.
            run: the run this call belongs to (not hashed): a request it opens is scoped to
                the run, and only a grant of the same run authorizes it (another run's, or an
                unscoped one, is refused :class:`ApprovalOtherRun`; a denial stands in every
                run).
            correlation: ``(framework, call_id)``, as for :meth:`request_approval`.

        Raises:
            CountersignError: a subclass per refusal (``did_run``/``may_retry`` say what
                happened). Raise :class:`NotExecuted` from the executor when its effect
                definitely did not happen; any other exception becomes :class:`OutcomeUnknown`.
        """

        value, receipt = self._native.execute(
            action,
            _arguments_json(arguments),
            executor,
            approval,
            timeout,
            run,
            _correlation(correlation),
        )
        return Executed(value, receipt)

    async def execute_async(
        self,
        action: str,
        arguments: Mapping[str, Any] | RawArguments,
        executor: Callable[[dict], Awaitable[Any]],
        *,
        approval: Optional[str] = None,
        timeout: Optional[float] = None,
        run: Optional[str] = None,
        correlation: Optional[Correlation] = None,
    ) -> Executed:
        """As :meth:`execute`, for an async executor; never blocks the event loop.

        The kernel runs in a worker thread (``asyncio.to_thread``, GIL released while it works)
        and the coroutine runs on this loop. Cancelling the awaiting task does not stop an
        attempt that has started: it runs to its end and records its outcome.
        """
        loop = asyncio.get_running_loop()

        def bridge(canonical: dict) -> Any:
            coroutine = executor(canonical)
            return asyncio.run_coroutine_threadsafe(coroutine, loop).result()

        value, receipt = await asyncio.to_thread(
            self._native.execute,
            action,
            _arguments_json(arguments),
            bridge,
            approval,
            timeout,
            run,
            _correlation(correlation),
        )
        return Executed(value, receipt)

    def protect(
        self, action: str, *, timeout: Optional[float] = None, run: Optional[str] = None
    ) -> Callable[[F], F]:
        """Decorate a function (sync or ``async``) as the protected tool ``action``.

        The decorated function is called with its own parameters; they are bound by name into
        the call's arguments (defaults applied), decided by policy, and the function runs with
        the canonical arguments — exactly what was hashed and approved. It returns the
        function's value or raises a :class:`CountersignError`.

        ``run`` scopes every call of the function to one run (see :meth:`execute`).
        """

        def decorate(function: F) -> F:
            signature = inspect.signature(function)

            def bind(args: tuple, kwargs: dict) -> dict:
                bound = signature.bind(*args, **kwargs)
                bound.apply_defaults()
                return dict(bound.arguments)

            if inspect.iscoroutinefunction(function):

                @functools.wraps(function)
                async def protected_async(*args: Any, **kwargs: Any) -> Any:
                    async def call(canonical: dict) -> Any:
                        return await function(**canonical)

                    done = await self.execute_async(
                        action, bind(args, kwargs), call, timeout=timeout, run=run
                    )
                    return done.value

                protected_async.countersign_action = action  # type: ignore[attr-defined]
                return protected_async  # type: ignore[return-value]

            @functools.wraps(function)
            def protected(*args: Any, **kwargs: Any) -> Any:
                done = self.execute(
                    action, bind(args, kwargs), lambda canonical: function(**canonical),
                    timeout=timeout,
                    run=run,
                )
                return done.value

            protected.countersign_action = action  # type: ignore[attr-defined]
            return protected  # type: ignore[return-value]

        return decorate

    def answer(
        self,
        request_id: str,
        decision: Any,
        *,
        approver: Optional[str] = None,
        token: Optional[str] = None,
        action_hash: Optional[str] = None,
        note: Optional[str] = None,
    ) -> ApprovalRequest:
        """Record an answer through the one answer contract, judged by the request's stored
        rule (who may approve, how many must, what identity is required).

        ``decision`` is read strictly: only ``"approve"`` and ``"deny"`` (or ``"reject"``) are
        decisions; ``None``, ``True``, ``1``, ``"yes"``, a dict... are refused
        (:class:`InvalidDecision`) and recorded, and the request is unchanged. Who answers is
        ``token`` (an approver token from ``countersign approver token``) or else ``approver``
        (a name nobody verified: refused where the rule says ``require: authenticated``).
        ``action_hash`` is the hash the person was shown: an answer about another hash is
        refused (:class:`AnswerMismatch`). A quorum request stays ``pending`` until enough
        distinct approvers said yes.

        Raises:
            ApprovalUnknown, AlreadyDecided, ApprovalExpired, NoApprover, NoteTooLong (``note``
            longer than 4,096 bytes), AnswerRefused (and its
            subclasses SelfApproval, InvalidDecision, NotAuthenticated, NotEntitled,
            AnswerMismatch), StoreError.
        """
        try:
            decision_json = json.dumps(decision)
        except (TypeError, ValueError):
            decision_json = json.dumps(repr(decision))
        return ApprovalRequest._from_json(
            self._native.answer(
                request_id, decision_json, approver, note, token, action_hash
            )
        )

    def revoke(
        self,
        request_id: str,
        *,
        approver: Optional[str] = None,
        token: Optional[str] = None,
        reason: Optional[str] = None,
    ) -> ApprovalRequest:
        """Take back a grant not yet used (the request becomes ``revoked`` and an attempt
        presenting it raises :class:`ApprovalRevoked`), or withdraw your counted yes from a
        quorum still ``pending``. Who revokes is ``token`` or else ``approver`` (asserted):
        an approver who gave a yes, or one the request's resolver rule entitles. ``reason`` is
        kept on the receipt.

        Raises:
            ApprovalConsumed (the grant was used: nothing changed), ApprovalRevoked,
            ApprovalCancelled, NotRevocable, ApprovalExpired, ApprovalUnknown, NoApprover,
            NoteTooLong (``reason`` longer than 4,096 bytes), AnswerRefused (NotEntitled, NotAuthenticated), StoreError.
        """
        return ApprovalRequest._from_json(
            self._native.withdraw(request_id, False, approver, token, reason)
        )

    def cancel(
        self,
        request_id: str,
        *,
        operator: str,
        reason: Optional[str] = None,
    ) -> ApprovalRequest:
        """Cancel a waiting (or granted, unused) request as the operator: it becomes
        ``cancelled``, leaves every inbox, and a late answer raises
        :class:`ApprovalCancelled`. Cancelling it again returns it unchanged.

        Raises:
            ApprovalConsumed, ApprovalRevoked, NotRevocable, ApprovalExpired, ApprovalUnknown,
            StoreError.
        """
        return ApprovalRequest._from_json(
            self._native.withdraw(request_id, True, operator, None, reason)
        )

    def cancel_run(
        self,
        run: str,
        *,
        operator: str,
        reason: Optional[str] = None,
    ) -> "list[tuple[str, Union[ApprovalRequest, CountersignError]]]":
        """Cancel every waiting (or granted, unused) request of an abandoned ``run``, oldest
        first, each in its own transaction. Returns ``(request_id, outcome)`` pairs: the
        cancelled :class:`ApprovalRequest`, or the refusal (an exception instance, not raised)
        for a request that changed meanwhile; the others still go ahead. An empty list means
        the run has nothing waiting.

        Raises:
            StoreError: the requests could not be listed.
        """
        pairs = self._native.cancel_run(run, operator, reason)
        return [
            (request_id, ApprovalRequest._from_json(outcome) if isinstance(outcome, str) else outcome)
            for request_id, outcome in pairs
        ]

    def revoke_token(
        self,
        token: str,
        *,
        operator: str,
        reason: Optional[str] = None,
    ) -> bool:
        """Put an approver token on the store's deny-list before it expires (the path
        ``countersign approver revoke`` uses): every answer presenting it is refused
        :class:`NotAuthenticated` on every surface from then on. ``token`` is the token's id
        (``tok_`` and 20 characters, as ``countersign approver token --json`` prints) or the
        whole token. Returns ``False`` when it was already revoked (nothing changed).

        Raises:
            ValueError: ``token`` is neither shape (the message says what to pass).
            StoreError.
        """
        return self._native.revoke_token(token, operator, reason)

    def approve(
        self,
        request_id: str,
        *,
        approver: Optional[str] = None,
        token: Optional[str] = None,
        action_hash: Optional[str] = None,
        note: Optional[str] = None,
    ) -> ApprovalRequest:
        """Say yes to a request (the path ``countersign approve`` uses): once the rule's quorum
        is reached it authorizes exactly the action it shows, once, until it expires. The first
        decisive answer wins; repeating the same answer is a success. See :meth:`answer`.
        """
        return self.answer(
            request_id, "approve", approver=approver, token=token,
            action_hash=action_hash, note=note,
        )

    def deny(
        self,
        request_id: str,
        *,
        approver: Optional[str] = None,
        token: Optional[str] = None,
        action_hash: Optional[str] = None,
        note: Optional[str] = None,
    ) -> ApprovalRequest:
        """Deny a request (the path ``countersign deny`` uses): the call gets a recorded denial,
        and an identical call is refused without asking again until the request's expiry. See
        :meth:`answer`.
        """
        return self.answer(
            request_id, "deny", approver=approver, token=token,
            action_hash=action_hash, note=note,
        )

    def interrupt(self, request_id: str) -> Optional[dict]:
        """The request as a chat surface shows it: the ``countersign.interrupt/v1`` object
        (``request_id``, ``action``, canonical ``arguments``, ``action_hash``, ``expires_at``,
        ``display`` and ``display_text`` — the kernel's one rendering —, and the two
        ``answers`` with the ``response`` each sends back), or ``None`` when there is no such
        request. The same object ``GET /api/v1/interrupts`` lists. A read."""
        text = _interrupt_object_json(self._native, request_id)
        return None if text is None else json.loads(text)

    def respond(
        self,
        request_id: str,
        response: Any,
        *,
        framework: str,
        approver: Optional[str] = None,
        token: Optional[str] = None,
    ) -> ApprovalRequest:
        """Hand one chat-surface response to the kernel's answer path, as ``POST
        /api/v1/interrupts/responses`` does, through the channel ``interrupt:<framework>``.

        ``response`` is read strictly: exactly ``{"decision": "approve" | "deny",
        "action_hash": "sha256:…", "note": "…"}`` (``note`` optional). Anything else — ``True``,
        ``"approve"``, ``None``, a missing key, an extra field such as ``approver`` — is
        refused :class:`InvalidDecision`, recorded with who sent it, and the request is
        unchanged. Who answers is ``token`` (verified) or else ``approver`` (asserted): the
        person your application signed in, never a name from the response.

        Raises:
            As :meth:`answer`.
        """
        try:
            response_json = json.dumps(response)
        except (TypeError, ValueError):
            response_json = json.dumps(repr(response))
        return ApprovalRequest._from_json(
            _respond(self._native, request_id, response_json, framework, approver, token)
        )

    def correlated(
        self, framework: str, run: Optional[str], call_id: str
    ) -> Optional[ApprovalRequest]:
        """The request the store maps the framework call ``(framework, run, call_id)`` to (see
        ``correlation=`` on :meth:`request_approval` and :meth:`execute`), or ``None``. A read:
        adapters may call it; they never write a mapping of their own."""
        text = self._native.correlated(framework, run, call_id)
        return None if text is None else ApprovalRequest._from_json(text)

    def approval(self, request_id: str) -> Optional[ApprovalRequest]:
        """One approval request, or ``None``."""
        text = self._native.approval(request_id)
        return None if text is None else ApprovalRequest._from_json(text)

    def approvals(self, state: Optional[str] = None) -> list[ApprovalRequest]:
        """Approval requests, oldest first; only those in ``state`` if given."""
        return [
            ApprovalRequest._from_json(json.dumps(record))
            for record in json.loads(self._native.approvals(state))
        ]

    def effect(self, key: str) -> Optional[dict]:
        """The effect record for ``key`` (``state``: reserved, executing, committed, failed,
        ambiguous), or ``None``."""
        text = self._native.effect(key)
        return None if text is None else json.loads(text)

    def receipts(self) -> list[dict]:
        """Every receipt, oldest first (``countersign.receipt/v2`` dicts; older ones may be
        ``v1``)."""
        return json.loads(self._native.receipts())

    def verify_receipts(self) -> dict:
        """Verify the hash chain; the report. Only ``outcome == "verified"`` is a pass:
        ``"unverifiable"`` means nothing was checked (an empty log), ``"failed"`` names the first
        bad record in ``first_break``. ``checked``, ``first_seq`` and ``head`` say how much."""
        return json.loads(self._native.verify_receipts())

    def __repr__(self) -> str:
        return (
            f"Control(policy={self.policy_path!r}, "
            f"principal={None if self.principal is None else self.principal.id!r}, "
            f"store_url={self.store_url!r})"
        )
