"""The exceptions Countersign raises: one class per kernel refusal family.

Every exception is a :class:`CountersignError` and answers two questions:

- ``did_run`` — did this attempt run the executor? :attr:`DidRun.NO` for every refusal made
  before the executor was called (and for :class:`NotExecuted`, whose executor said the effect
  definitely did not happen); :attr:`DidRun.MAYBE` when the executor ran and nobody knows what
  happened (:class:`OutcomeUnknown`, or a store failure after the run).
- ``may_retry`` — may the caller send the identical call again?

``reason`` is the kernel's stable reason code, the same string receipts, the CLI and the gateway
show (``unknown_action``, ``approval_denied``, ``mismatch``, ``duplicate``, ``ambiguous``, ...).
A reviewer's ``note`` is data written by a person: quote it, never follow it.
"""

from __future__ import annotations

import enum
from typing import Any, Optional

__all__ = [
    "Reason",
    "DidRun",
    "CountersignError",
    "PolicyError",
    "InvalidArguments",
    "BadTemplate",
    "NoPrincipal",
    "ActionDenied",
    "ApprovalError",
    "ApprovalRequired",
    "ApprovalDenied",
    "ApprovalMismatch",
    "ApprovalConsumed",
    "ApprovalExpired",
    "ApprovalUnknown",
    "ApprovalVoid",
    "ApprovalOtherRun",
    "ApprovalRevoked",
    "ApprovalCancelled",
    "NotRevocable",
    "InterruptFailed",
    "AlreadyDecided",
    "NoApprover",
    "NoteTooLong",
    "AnswerRefused",
    "SelfApproval",
    "InvalidApprover",
    "InvalidDecision",
    "NotAuthenticated",
    "NotEntitled",
    "AnswerMismatch",
    "DuplicateEffect",
    "AmbiguousEffect",
    "NotExecuted",
    "OutcomeUnknown",
    "StoreError",
    "InternalError",
]


class Reason(str, enum.Enum):
    """The kernel's refusal codes, a closed set (a ``str``: compares equal to its wire string).

    The same set as the kernel's ``countersign::Reason`` (issue #19);
    ``tests/test_numbers.py::test_the_reason_enum_is_the_kernels`` checks they agree.
    ``str()`` and f-strings give the wire string, as they did when ``reason`` was a plain ``str``.
    """

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, format_spec: str) -> str:
        return format(str(self.value), format_spec)

    INVALID_ARGUMENTS = "invalid_arguments"
    BAD_TEMPLATE = "bad_template"
    NO_PRINCIPAL = "no_principal"
    UNKNOWN_ACTION = "unknown_action"
    NO_MATCHING_RULE = "no_matching_rule"
    DENIED = "denied"
    POLICY_CHANGED = "policy_changed"
    APPROVAL_REQUIRED = "approval_required"
    APPROVAL_DENIED = "approval_denied"
    MISMATCH = "mismatch"
    CONSUMED = "consumed"
    EXPIRED = "expired"
    UNKNOWN_REQUEST = "unknown_request"
    REVOKED = "revoked"
    CANCELLED = "cancelled"
    TOOL_CHANGED = "tool_changed"
    OTHER_RUN = "other_run"
    INTERRUPT_FAILED = "interrupt_failed"
    NOT_ENTITLED = "not_entitled"
    NOT_AUTHENTICATED = "not_authenticated"
    SELF_APPROVAL = "self_approval"
    INVALID_DECISION = "invalid_decision"
    NOTE_TOO_LONG = "note_too_long"
    ALREADY_DECIDED = "already_decided"
    INVALID_APPROVER = "invalid_approver"
    NO_APPROVER = "no_approver"
    NOT_REVOCABLE = "not_revocable"
    IN_PROGRESS = "in_progress"
    DUPLICATE = "duplicate"
    AMBIGUOUS = "ambiguous"
    NOT_EXECUTED = "not_executed"
    OUTCOME_UNKNOWN = "outcome_unknown"
    STORE_BUSY = "store_busy"
    STORE_OUTCOME_UNKNOWN = "store_outcome_unknown"
    STORE_INCOMPATIBLE = "store_incompatible"
    STORE_CORRUPT = "store_corrupt"
    STORE_OPEN = "store_open"
    STORE_ERROR = "store_error"
    INTERNAL = "internal"


def _as_reason(code: str) -> "Reason | str":
    """The :class:`Reason` for a kernel code; other codes (``policy_load``) stay strings."""
    try:
        return Reason(code)
    except ValueError:
        return code


class DidRun(str, enum.Enum):
    """Did an attempt's executor run? (a ``str``: compares equal to ``"no"`` / ``"maybe"``)"""

    NO = "no"
    """The executor was not called by this attempt (or said it had no effect)."""
    MAYBE = "maybe"
    """The executor was called and its outcome is unknown: it may have had its effect."""


class CountersignError(Exception):
    """Base class of every Countersign refusal and failure.

    Attributes:
        reason: the stable reason code: a :class:`Reason` (a ``str``) for every kernel refusal,
            a plain ``str`` for the binding's own (``policy_load``).
        did_run: :class:`DidRun`.
        may_retry: ``True`` when the identical call may be sent again.
        message: the one-line message: what happened and what to do next.
    """

    default_reason = "error"
    default_may_retry = False

    reason: "Reason | str"
    did_run: DidRun
    may_retry: bool
    message: str

    def __init__(
        self,
        message: str,
        *,
        reason: Optional[str] = None,
        did_run: DidRun | str = DidRun.NO,
        may_retry: Optional[bool] = None,
        **fields: Any,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.reason = _as_reason(reason if reason is not None else self.default_reason)
        self.did_run = DidRun(did_run)
        self.may_retry = self.default_may_retry if may_retry is None else may_retry
        for name, value in fields.items():
            setattr(self, name, value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(reason={self.reason!r}, message={self.message!r})"


class PolicyError(CountersignError):
    """The policy file could not load (the message names file, line and column).

    A policy that cannot load never becomes a permissive one: fix the file.
    """

    default_reason = "policy_load"


class InvalidArguments(CountersignError):
    """An argument cannot be represented in canonical form (NaN, infinity, ``-0``, an integer
    outside ±(2**53−1), a value JSON cannot hold). Nothing was written.

    Attributes: ``action``, ``detail``, ``canonical_reason`` (the canonical form's reason:
    ``not_finite``, ``negative_zero``, ``unsafe_integer``, ``duplicate_key``, ...; ``None`` when
    the arguments were refused before they reached the kernel).
    """

    default_reason = "invalid_arguments"
    action: str
    detail: str
    canonical_reason: Optional[str] = None


class BadTemplate(CountersignError):
    """The policy's effect or resource template could not be rendered from the arguments.

    Attributes: ``action``, ``detail``.
    """

    default_reason = "bad_template"
    action: str
    detail: str


class NoPrincipal(CountersignError):
    """No principal vouched for the action: no principal, no action. Attribute: ``action``."""

    default_reason = "no_principal"
    action: str


class ActionDenied(CountersignError):
    """Policy denied the action (``reason``: ``unknown_action``, ``no_matching_rule`` or
    ``denied``). Do not retry.

    Attributes: ``action``, ``action_hash``, ``policy_hash``.
    """

    default_reason = "denied"
    action: str
    action_hash: str
    policy_hash: str


class ApprovalError(CountersignError):
    """Base class of the approval refusals. Attribute: ``request_id`` (``apr_…``)."""

    default_reason = "approval"
    request_id: str


class ApprovalRequired(ApprovalError):
    """A human must approve first; a pending request exists. Nothing else was written.

    Answer it (``countersign approve <request_id>`` or :meth:`countersign.Control.approve`),
    then send the identical call again.

    Attributes: ``request_id``, ``action_hash`` (``sha256:`` + 64 hex), ``expires_at`` (UTC,
    RFC 3339).
    """

    default_reason = "approval_required"
    default_may_retry = True
    action_hash: str
    expires_at: str


class ApprovalDenied(ApprovalError):
    """A human denied this action: a recorded decision, not an error to retry.

    Attributes: ``request_id``, ``approver``, ``note`` (the reviewer's text, data only, or
    ``None``).
    """

    default_reason = "approval_denied"
    approver: str
    note: Optional[str]


class ApprovalMismatch(ApprovalError):
    """The presented approval was given for different arguments: it authorizes nothing.

    Attributes: ``request_id``, ``approved_hash``, ``action_hash``.
    """

    default_reason = "mismatch"
    approved_hash: str
    action_hash: str


class ApprovalConsumed(ApprovalError):
    """The approval was already used: an approval authorizes one attempt."""

    default_reason = "consumed"


class ApprovalExpired(ApprovalError):
    """The approval expired before it was answered or used; it will never authorize anything.
    Sending the call again requests a new approval. Attribute: ``expires_at``."""

    default_reason = "expired"
    default_may_retry = True
    expires_at: str


class ApprovalUnknown(ApprovalError):
    """No approval request has this id."""

    default_reason = "unknown_request"


class ApprovalVoid(ApprovalError):
    """The action's policy entry changed since the request: the approval is void."""

    default_reason = "policy_changed"
    default_may_retry = True


class ApprovalOtherRun(ApprovalError):
    """The presented approval belongs to another run (or to a run, presented by a call naming
    none, or the reverse): a run's approval never leaks to another run. Send the call without it
    to request an approval for this run. Attributes: ``request_id``, ``run`` (the request's)."""

    default_reason = "other_run"
    default_may_retry = True
    run: Optional[str] = None


class ApprovalRevoked(ApprovalError):
    """The grant was revoked before it was used (by an approver who gave it, or an entitled
    resolver): it authorizes nothing, and no answer changes it. Sending the call again without
    it requests a new approval. Attribute: ``request_id``."""

    default_reason = "revoked"
    default_may_retry = True


class ApprovalCancelled(ApprovalError):
    """The operator cancelled the request (an abandoned run): it authorizes nothing, and no
    answer changes it. Sending the call again requests a new approval. Attribute:
    ``request_id``."""

    default_reason = "cancelled"
    default_may_retry = True


class NotRevocable(ApprovalError):
    """There is nothing to take back: the request is ``denied``, ``expired`` or ``void`` (or,
    for a revocation, ``pending`` with no yes from this approver). Nothing changed. Attributes:
    ``request_id``, ``state``."""

    default_reason = "not_revocable"
    state: str


class InterruptFailed(ApprovalError):
    """Asking through a framework's interrupt failed; the request stays pending."""

    default_reason = "interrupt_failed"
    default_may_retry = True


class AlreadyDecided(ApprovalError):
    """The request was already answered differently; the first answer stands.

    Attributes: ``state`` (the stored state), ``approver`` (who answered first, or ``None``).
    """

    default_reason = "already_decided"
    state: str
    approver: Optional[str]


class NoApprover(CountersignError):
    """An answer must say who is answering: an anonymous answer authorizes nothing."""

    default_reason = "no_approver"


class NoteTooLong(CountersignError):
    """The note kept with an answer or a revocation is longer than 4,096 bytes (UTF-8):
    nothing was recorded and no receipt carries it; send it again with a shorter note.
    Attributes: ``bytes`` (the note's length), ``limit`` (4,096)."""

    default_reason = "note_too_long"
    default_may_retry = True
    bytes: int
    limit: int


class AnswerRefused(CountersignError):
    """An answer was refused by the request's stored approval rule or by the answer contract:
    it authorizes nothing, a refusal receipt was written and the request is unchanged, so an
    entitled approver may still answer. ``reason`` says which rule: ``not_entitled``,
    ``not_authenticated``, ``self_approval``, ``invalid_decision``, ``mismatch``,
    ``already_decided``, ``no_approver``. Attribute: ``request_id``."""

    default_reason = "answer_refused"
    default_may_retry = True
    request_id: str


class SelfApproval(AnswerRefused):
    """The approver is the principal that asked for the approval, or shares a group with it
    when the rule says ``distinct_from_requester``: the identity that requests an action never
    answers for it. Attributes: ``request_id``, ``approver``, ``shared_group``."""

    default_reason = "self_approval"
    approver: str
    shared_group: Optional[str] = None


class InvalidDecision(AnswerRefused):
    """The decision is not ``"approve"`` or ``"deny"`` (``None``, ``True``, ``1``, ``"yes"``,
    ...): nothing changed (case B38). Attributes: ``request_id``, ``given`` (as JSON)."""

    default_reason = "invalid_decision"
    given: str


class InvalidApprover(AnswerRefused):
    """The approver id is not of the one shape: a name such as ``alice`` or ``kind:name`` such
    as ``human:alice`` (``"human:"``, ``":"`` and ``"human: bob"`` are refused): nothing changed
    (issue #19). Attributes: ``request_id``, ``given``."""

    default_reason = "invalid_approver"
    given: str


class NotAuthenticated(AnswerRefused):
    """The rule requires an authenticated approver (an approver token) and the answer's
    identity was asserted, or its token did not verify. Attributes: ``request_id``,
    ``approver`` (or ``None``)."""

    default_reason = "not_authenticated"
    approver: Optional[str] = None


class NotEntitled(AnswerRefused):
    """No approver pattern of the request's rule matches the approver. Attributes:
    ``request_id``, ``approver``, ``approvers`` (who may answer, as one line)."""

    default_reason = "not_entitled"
    approver: str
    approvers: str


class AnswerMismatch(AnswerRefused):
    """The action hash the surface showed is not the request's: the person saw another action.
    Attributes: ``request_id``, ``shown``, ``action_hash``."""

    default_reason = "mismatch"
    shown: str
    action_hash: str


class DuplicateEffect(CountersignError):
    """The effect key was already used: committed (``in_progress`` false: it runs at most once)
    or held by a live attempt (``in_progress`` true: wait, then check).

    Attributes: ``effect_key``, ``in_progress``.
    """

    default_reason = "duplicate"
    effect_key: str
    in_progress: bool


class AmbiguousEffect(CountersignError):
    """An earlier attempt on this effect key may have run; retries are refused until someone
    resolves it (``countersign resolve <key> --committed|--failed``). Attribute: ``effect_key``.
    """

    default_reason = "ambiguous"
    effect_key: str


class NotExecuted(CountersignError):
    """The effect definitely did not happen: a retry is allowed.

    **Raise it from an executor** when you know the call had no effect (the connection was
    refused before any byte was sent, a documented non-executing validation error). Any other
    exception an executor raises makes the outcome unknown (:class:`OutcomeUnknown`) and blocks
    retries until resolved.

    Attributes when raised by Countersign: ``effect_key`` (now ``failed``, or ``None``),
    ``detail``.
    """

    default_reason = "not_executed"
    default_may_retry = True
    effect_key: Optional[str] = None
    detail: Optional[str] = None


class OutcomeUnknown(CountersignError):
    """The executor ran and its outcome is unknown (it raised, timed out or was cancelled).
    The effect is ``ambiguous`` and retries are refused until resolved. The executor's own
    exception, if any, is ``__cause__``.

    Attributes: ``action``, ``effect_key``, ``detail``.
    """

    default_reason = "outcome_unknown"
    action: str
    effect_key: Optional[str]
    detail: str


class StoreError(CountersignError):
    """The store failed. ``after_run`` true: the executor ran but its outcome may be unrecorded
    (``did_run`` is ``maybe``); false: nothing ran. ``may_retry`` is true for a busy store."""

    default_reason = "store"
    after_run: bool


class InternalError(CountersignError):
    """A bug in Countersign: please report it with this message."""

    default_reason = "internal"


def _from_kernel(
    class_name: str,
    message: str,
    reason: str,
    did_run: str,
    may_retry: bool,
    fields: dict,
    cause: Optional[BaseException] = None,
) -> CountersignError:
    """Build the exception for a kernel failure (called by the native module)."""
    cls = globals().get(class_name)
    if not (isinstance(cls, type) and issubclass(cls, CountersignError)):
        cls = InternalError
    error = cls(message, reason=reason, did_run=did_run, may_retry=may_retry, **fields)
    if cause is not None:
        error.__cause__ = cause
    return error
