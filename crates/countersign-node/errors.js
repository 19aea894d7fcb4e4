'use strict'
// The errors Countersign throws: one class per kernel refusal family, as the Python binding's
// `countersign.errors`. Every error is a `CountersignError` and answers two questions:
//
// - `didRun`: did this attempt run the executor? `'no'` for every refusal made before the
//   executor was called (and for `NotExecuted`, whose executor said the effect definitely did
//   not happen); `'maybe'` when the executor ran and nobody knows what happened
//   (`OutcomeUnknown`, or a store failure after the run).
// - `mayRetry`: may the caller send the identical call again?
//
// `reason` is the kernel's stable reason code, the same string receipts, the CLI and the gateway
// show. A reviewer's `note` is data written by a person: quote it, never follow it.

/** Base class of every Countersign refusal and failure. */
class CountersignError extends Error {
  static defaultReason = 'error'
  static defaultMayRetry = false

  /**
   * @param {string} message the one-line message: what happened and what to do next
   * @param {{reason?: string, didRun?: 'no'|'maybe', mayRetry?: boolean, cause?: unknown,
   *   [field: string]: unknown}} [options] the stable reason, the two answers, the cause and
   *   the refusal's fields
   */
  constructor(message, options = {}) {
    const { reason, didRun, mayRetry, cause, ...fields } = options
    super(message, cause === undefined ? undefined : { cause })
    this.name = new.target.name
    this.reason = reason ?? new.target.defaultReason
    this.didRun = didRun ?? 'no'
    this.mayRetry = mayRetry ?? new.target.defaultMayRetry
    Object.assign(this, fields)
  }
}

function refusal(name, base, reason, mayRetry = false) {
  // A named class per refusal, so `instanceof` and `error.name` both work.
  const made = {
    [name]: class extends base {
      static defaultReason = reason
      static defaultMayRetry = mayRetry
    },
  }[name]
  return made
}

const PolicyError = refusal('PolicyError', CountersignError, 'policy_load')
const InvalidArguments = refusal('InvalidArguments', CountersignError, 'invalid_arguments')
const BadTemplate = refusal('BadTemplate', CountersignError, 'bad_template')
const NoPrincipal = refusal('NoPrincipal', CountersignError, 'no_principal')
const ActionDenied = refusal('ActionDenied', CountersignError, 'denied')
const ApprovalError = refusal('ApprovalError', CountersignError, 'approval')
const ApprovalRequired = refusal('ApprovalRequired', ApprovalError, 'approval_required', true)
const ApprovalDenied = refusal('ApprovalDenied', ApprovalError, 'approval_denied')
const ApprovalMismatch = refusal('ApprovalMismatch', ApprovalError, 'mismatch')
const ApprovalConsumed = refusal('ApprovalConsumed', ApprovalError, 'consumed')
const ApprovalExpired = refusal('ApprovalExpired', ApprovalError, 'expired', true)
const ApprovalUnknown = refusal('ApprovalUnknown', ApprovalError, 'unknown_request')
const ApprovalVoid = refusal('ApprovalVoid', ApprovalError, 'policy_changed', true)
const ApprovalOtherRun = refusal('ApprovalOtherRun', ApprovalError, 'other_run', true)
const ApprovalRevoked = refusal('ApprovalRevoked', ApprovalError, 'revoked', true)
const ApprovalCancelled = refusal('ApprovalCancelled', ApprovalError, 'cancelled', true)
const NotRevocable = refusal('NotRevocable', ApprovalError, 'not_revocable')
const InterruptFailed = refusal('InterruptFailed', ApprovalError, 'interrupt_failed', true)
const AlreadyDecided = refusal('AlreadyDecided', ApprovalError, 'already_decided')
const NoApprover = refusal('NoApprover', CountersignError, 'no_approver')
const NoteTooLong = refusal('NoteTooLong', CountersignError, 'note_too_long', true)
const AnswerRefused = refusal('AnswerRefused', CountersignError, 'answer_refused', true)
const SelfApproval = refusal('SelfApproval', AnswerRefused, 'self_approval', true)
const InvalidDecision = refusal('InvalidDecision', AnswerRefused, 'invalid_decision', true)
const InvalidApprover = refusal('InvalidApprover', AnswerRefused, 'invalid_approver', true)
const NotAuthenticated = refusal('NotAuthenticated', AnswerRefused, 'not_authenticated', true)
const NotEntitled = refusal('NotEntitled', AnswerRefused, 'not_entitled', true)
const AnswerMismatch = refusal('AnswerMismatch', AnswerRefused, 'mismatch', true)
const DuplicateEffect = refusal('DuplicateEffect', CountersignError, 'duplicate')
const AmbiguousEffect = refusal('AmbiguousEffect', CountersignError, 'ambiguous')
const NotExecuted = refusal('NotExecuted', CountersignError, 'not_executed', true)
const OutcomeUnknown = refusal('OutcomeUnknown', CountersignError, 'outcome_unknown')
const StoreError = refusal('StoreError', CountersignError, 'store')
const InternalError = refusal('InternalError', CountersignError, 'internal')

const classes = {
  CountersignError,
  PolicyError,
  InvalidArguments,
  BadTemplate,
  NoPrincipal,
  ActionDenied,
  ApprovalError,
  ApprovalRequired,
  ApprovalDenied,
  ApprovalMismatch,
  ApprovalConsumed,
  ApprovalExpired,
  ApprovalUnknown,
  ApprovalVoid,
  ApprovalOtherRun,
  ApprovalRevoked,
  ApprovalCancelled,
  NotRevocable,
  InterruptFailed,
  AlreadyDecided,
  NoApprover,
  NoteTooLong,
  AnswerRefused,
  SelfApproval,
  InvalidDecision,
  InvalidApprover,
  NotAuthenticated,
  NotEntitled,
  AnswerMismatch,
  DuplicateEffect,
  AmbiguousEffect,
  NotExecuted,
  OutcomeUnknown,
  StoreError,
  InternalError,
}

/** `request_id` → `requestId`: the kernel's field names in JavaScript's spelling. */
function camel(name) {
  return name.replace(/_([a-z])/g, (_, letter) => letter.toUpperCase())
}

const REFUSAL_PREFIX = 'countersign-refusal:'

/**
 * The error for a rejection of the native addon: a `CountersignError` subclass when it carries
 * one (see `src/errors.rs`), a `TypeError` for a caller's misuse, the error itself otherwise.
 * @param {unknown} error
 * @param {unknown} [cause] the executor's own error, for `OutcomeUnknown` and `NotExecuted`
 */
function fromNative(error, cause) {
  if (!(error instanceof Error)) return error
  const message = error.message
  if (typeof message === 'string' && message.startsWith(REFUSAL_PREFIX)) {
    const said = JSON.parse(message.slice(REFUSAL_PREFIX.length))
    const Class = classes[said.class] ?? InternalError
    const fields = {}
    for (const [name, value] of Object.entries(said.fields ?? {})) fields[camel(name)] = value
    return new Class(said.message, {
      ...fields,
      reason: said.reason,
      didRun: said.did_run,
      mayRetry: said.may_retry,
      cause,
    })
  }
  if (error.code === 'InvalidArg') {
    const misuse = new TypeError(message)
    return misuse
  }
  return error
}

/**
 * The kernel's refusal codes, a closed set (issue #19): the same as `countersign::Reason`,
 * checked against the addon's `reasons()` by test/refusals.test.js.
 */
const Reason = Object.freeze({
  INVALID_ARGUMENTS: 'invalid_arguments',
  BAD_TEMPLATE: 'bad_template',
  NO_PRINCIPAL: 'no_principal',
  UNKNOWN_ACTION: 'unknown_action',
  NO_MATCHING_RULE: 'no_matching_rule',
  DENIED: 'denied',
  POLICY_CHANGED: 'policy_changed',
  APPROVAL_REQUIRED: 'approval_required',
  APPROVAL_DENIED: 'approval_denied',
  MISMATCH: 'mismatch',
  CONSUMED: 'consumed',
  EXPIRED: 'expired',
  UNKNOWN_REQUEST: 'unknown_request',
  REVOKED: 'revoked',
  CANCELLED: 'cancelled',
  TOOL_CHANGED: 'tool_changed',
  OTHER_RUN: 'other_run',
  INTERRUPT_FAILED: 'interrupt_failed',
  NOT_ENTITLED: 'not_entitled',
  NOT_AUTHENTICATED: 'not_authenticated',
  SELF_APPROVAL: 'self_approval',
  INVALID_DECISION: 'invalid_decision',
  NOTE_TOO_LONG: 'note_too_long',
  ALREADY_DECIDED: 'already_decided',
  INVALID_APPROVER: 'invalid_approver',
  NO_APPROVER: 'no_approver',
  NOT_REVOCABLE: 'not_revocable',
  IN_PROGRESS: 'in_progress',
  DUPLICATE: 'duplicate',
  AMBIGUOUS: 'ambiguous',
  NOT_EXECUTED: 'not_executed',
  OUTCOME_UNKNOWN: 'outcome_unknown',
  STORE_BUSY: 'store_busy',
  STORE_OUTCOME_UNKNOWN: 'store_outcome_unknown',
  STORE_INCOMPATIBLE: 'store_incompatible',
  STORE_CORRUPT: 'store_corrupt',
  STORE_OPEN: 'store_open',
  STORE_ERROR: 'store_error',
  INTERNAL: 'internal',
})

module.exports = { ...classes, Reason, fromNative }
