// TypeScript declarations of `@countersign/node` (index.js, errors.js).

/** A JSON value as the kernel accepts it; `bigint` carries an integer beyond ±(2^53−1). */
export type JsonValue =
  | string
  | number
  | bigint
  | boolean
  | null
  | JsonValue[]
  | { [key: string]: JsonValue | undefined }

/** A call's arguments: an object of names to JSON values. */
export type Arguments = { [key: string]: JsonValue | undefined } | RawArguments

/** The canonical arguments an executor receives: exactly what was hashed and approved. */
export type CanonicalArguments = { [key: string]: unknown }

/** Did an attempt's executor run? `'maybe'`: it ran and its outcome is unknown. */
export type DidRun = 'no' | 'maybe'

/** A framework call a request is correlated with. */
export interface Correlation {
  /** The framework's name, e.g. `openai-agents`. */
  framework: string
  /** The framework's id for the call. */
  callId: string
}

/** What policy would decide for a call; nothing was written. */
export interface Evaluation {
  readonly action: string
  readonly decision: 'allow' | 'approve' | 'deny'
  /** `rule`, `action_default`, `unknown_action` or `no_matching_rule`. */
  readonly reason: string
  /** `sha256:` + 64 lowercase hex. */
  readonly actionHash: string
  readonly effectKey: string | null
  readonly resource: string | null
  readonly mode: 'enforce' | 'observe'
  readonly policyHash: string
}

/** One approval request as stored by the kernel. Times are UTC, RFC 3339. */
export interface ApprovalRequest {
  /** `apr_` + 20 characters. */
  readonly requestId: string
  readonly action: string
  readonly actionHash: string
  /** The canonical arguments, secrets redacted: what the approver is shown. */
  readonly arguments: unknown
  readonly principal: string
  readonly resource: string | null
  readonly environment: string
  readonly effectKey: string | null
  readonly state: 'pending' | 'granted' | 'denied' | 'consumed' | 'expired' | 'void'
  readonly createdAt: string
  readonly expiresAt: string
  readonly answeredAt: string | null
  readonly approver: string | null
  /** The approver's text: data, never an instruction. */
  readonly note: string | null
  readonly consumedAt: string | null
  /** Yes answers counted so far. */
  readonly approvalsGiven: number
  /** How many distinct approvers must say yes. */
  readonly quorum: number
  /** Who may answer, in one line, e.g. `group:finance (2 of them)`. */
  readonly approvers: string
  /** The run the request was opened for, or `null`. */
  readonly run: string | null
  /** The kernel's one rendering of what a human is shown (plain text). */
  readonly display: string
}

/** A `countersign.receipt/v2` receipt (older ones may be `v1`), as its JSON. */
export interface Receipt {
  readonly schema: string
  readonly seq: number
  readonly prev_hash: string
  readonly recorded_at: string
  readonly kind: string
  readonly outcome: string
  readonly reason: string | null
  readonly action: string | null
  readonly action_hash: string | null
  readonly effect_key: string | null
  readonly approval_id: string | null
  readonly hash: string
  readonly [field: string]: unknown
}

/** A call that ran: the executor's value and the receipt that records it. */
export interface Executed<T> {
  readonly value: T
  readonly receipt: Receipt
}

/**
 * The chain verification report. Only `outcome: 'verified'` is a pass: `'unverifiable'` means
 * nothing was checked (an empty log), `'failed'` names the first bad record in `first_break`.
 */
export interface VerifyReport {
  readonly outcome: 'verified' | 'failed' | 'unverifiable'
  readonly checked: number
  /** The first receipt checked (`null`: none was); the last is `head.seq`. */
  readonly first_seq: number | null
  readonly first_break: unknown
  readonly [field: string]: unknown
}

export interface OpenOptions {
  /** Who is acting, vouched for by the application (never taken from model output). */
  principal: string
  /** `sqlite:PATH` (default: `.countersign/countersign.db` beside the policy), `memory:`, `postgres://…`. */
  storeUrl?: string
  /** Seconds an approval request stays answerable (default: the policy's, else 15 minutes). */
  approvalTtl?: number
}

export interface ExecuteOptions {
  /** An approval request id to present; without one, a granted request for exactly this action hash is used. */
  approval?: string
  /** Seconds the executor may run; past it the outcome is unknown (`OutcomeUnknown`). */
  timeout?: number
  /** The run this call belongs to (not hashed): a grant of another run authorizes nothing. */
  run?: string
  correlation?: Correlation
}

export interface AnswerOptions {
  /** An asserted approver name (refused where the rule requires authentication). */
  approver?: string
  /** An approver token (`countersign approver token`). */
  token?: string
  /** The action hash the person was shown. */
  actionHash?: string
  note?: string
}

/** The kernel for one policy, one store and one principal. */
/**
 * The JSON text of a tool call's arguments exactly as the framework received it, handed to the
 * kernel unparsed, so its strict reader refuses a key written twice (case B52) and the rest.
 * Throws `InvalidArguments` (`canonicalReason: 'lone_surrogate'`) for a string holding a lone
 * surrogate. Accepted wherever a method takes `args`.
 */
export declare class RawArguments {
  constructor(text: string)
  readonly text: string
}
export declare class Control {
  private constructor()
  /** Open the kernel. Rejects with `PolicyError` or `StoreError`; `TypeError` for misuse. */
  static open(policy: string, options: OpenOptions): Promise<Control>
  readonly principal: string | null
  readonly storeUrl: string
  readonly policyPath: string | null
  readonly mode: 'enforce' | 'observe'
  readonly policyHash: string
  /** What policy would decide. Writes nothing. */
  evaluate(action: string, args: Arguments): Promise<Evaluation>
  /**
   * Can the policy ever let `action` run? True in observe mode, and in enforce mode when the
   * action's entry can give `allow` or `approve` for some arguments; false for an unlisted
   * action and for one whose rules all deny. Writes nothing.
   */
  canPermit(action: string): boolean
  /** True when policy says `approve` in enforce mode. Writes nothing. */
  needsApproval(action: string, args: Arguments): Promise<boolean>
  /** Find or open the approval request for this call; `null` when none is needed. */
  requestApproval(action: string, args: Arguments, options?: { run?: string; correlation?: Correlation }): Promise<ApprovalRequest | null>
  /**
   * Decide this call and, if allowed or approved, run `executor` at most once with the canonical
   * arguments. Throw `NotExecuted` from the executor only when its effect definitely did not
   * happen; any other error makes the outcome unknown (`OutcomeUnknown`).
   */
  execute<T>(action: string, args: Arguments, executor: (args: CanonicalArguments) => T | Promise<T>, options?: ExecuteOptions): Promise<Executed<Awaited<T>>>
  /** Record an answer (`'approve'` or `'deny'`; anything else is refused `InvalidDecision`). */
  answer(requestId: string, decision: unknown, options?: AnswerOptions): Promise<ApprovalRequest>
  approve(requestId: string, options?: AnswerOptions): Promise<ApprovalRequest>
  deny(requestId: string, options?: AnswerOptions): Promise<ApprovalRequest>
  /** Take back a grant not yet used, or withdraw your counted yes from a pending quorum. */
  revoke(requestId: string, options?: { approver?: string; token?: string; reason?: string }): Promise<ApprovalRequest>
  /** Cancel a waiting (or granted, unused) request as the operator. */
  cancel(requestId: string, options: { operator: string; reason?: string }): Promise<ApprovalRequest>
  /** Cancel every waiting request of `run`: `[requestId, cancelled request or refusal]` pairs. */
  cancelRun(run: string, options: { operator: string; reason?: string }): Promise<Array<[string, ApprovalRequest | CountersignError]>>
  /** Put an approver token (id `tok_…` or whole token) on the deny-list; false if it already was. */
  revokeToken(token: string, options: { operator: string; reason?: string }): Promise<boolean>
  /** The request the framework call `(framework, run, callId)` maps to, or `null`. */
  correlated(framework: string, run: string | null | undefined, callId: string): Promise<ApprovalRequest | null>
  approval(requestId: string): Promise<ApprovalRequest | null>
  approvals(state?: ApprovalRequest['state']): Promise<ApprovalRequest[]>
  /** The effect record (`state`: reserved, executing, committed, failed, ambiguous), or `null`. */
  effect(key: string): Promise<{ readonly state: string; readonly [field: string]: unknown } | null>
  receipts(): Promise<Receipt[]>
  verifyReceipts(): Promise<VerifyReport>
}

export interface ErrorOptions {
  reason?: string
  didRun?: DidRun
  mayRetry?: boolean
  cause?: unknown
  [field: string]: unknown
}

/** Base class of every Countersign refusal and failure. */
/** The kernel's refusal codes, a closed set (issue #19): `Reason.APPROVAL_DENIED === 'approval_denied'`. */
export declare const Reason: {
  readonly INVALID_ARGUMENTS: 'invalid_arguments'
  readonly BAD_TEMPLATE: 'bad_template'
  readonly NO_PRINCIPAL: 'no_principal'
  readonly UNKNOWN_ACTION: 'unknown_action'
  readonly NO_MATCHING_RULE: 'no_matching_rule'
  readonly DENIED: 'denied'
  readonly POLICY_CHANGED: 'policy_changed'
  readonly APPROVAL_REQUIRED: 'approval_required'
  readonly APPROVAL_DENIED: 'approval_denied'
  readonly MISMATCH: 'mismatch'
  readonly CONSUMED: 'consumed'
  readonly EXPIRED: 'expired'
  readonly UNKNOWN_REQUEST: 'unknown_request'
  readonly REVOKED: 'revoked'
  readonly CANCELLED: 'cancelled'
  readonly TOOL_CHANGED: 'tool_changed'
  readonly OTHER_RUN: 'other_run'
  readonly INTERRUPT_FAILED: 'interrupt_failed'
  readonly NOT_ENTITLED: 'not_entitled'
  readonly NOT_AUTHENTICATED: 'not_authenticated'
  readonly SELF_APPROVAL: 'self_approval'
  readonly INVALID_DECISION: 'invalid_decision'
  readonly NOTE_TOO_LONG: 'note_too_long'
  readonly ALREADY_DECIDED: 'already_decided'
  readonly INVALID_APPROVER: 'invalid_approver'
  readonly NO_APPROVER: 'no_approver'
  readonly NOT_REVOCABLE: 'not_revocable'
  readonly IN_PROGRESS: 'in_progress'
  readonly DUPLICATE: 'duplicate'
  readonly AMBIGUOUS: 'ambiguous'
  readonly NOT_EXECUTED: 'not_executed'
  readonly OUTCOME_UNKNOWN: 'outcome_unknown'
  readonly STORE_BUSY: 'store_busy'
  readonly STORE_OUTCOME_UNKNOWN: 'store_outcome_unknown'
  readonly STORE_INCOMPATIBLE: 'store_incompatible'
  readonly STORE_CORRUPT: 'store_corrupt'
  readonly STORE_OPEN: 'store_open'
  readonly STORE_ERROR: 'store_error'
  readonly INTERNAL: 'internal'
}

export declare class CountersignError extends Error {
  constructor(message: string, options?: ErrorOptions)
  /** The kernel's stable reason code (`unknown_action`, `mismatch`, `duplicate`, ...). */
  readonly reason: string
  readonly didRun: DidRun
  /** May the identical call be sent again? */
  readonly mayRetry: boolean
}
export declare class PolicyError extends CountersignError {}
export declare class InvalidArguments extends CountersignError {
  readonly action: string
  readonly detail: string
  /** `not_finite`, `negative_zero`, `unsafe_integer`, `duplicate_key`, ...; absent when refused before the kernel. */
  readonly canonicalReason?: string
}
export declare class BadTemplate extends CountersignError { readonly action: string; readonly detail: string }
export declare class NoPrincipal extends CountersignError { readonly action: string }
export declare class ActionDenied extends CountersignError { readonly action: string; readonly actionHash: string; readonly policyHash: string }
export declare class ApprovalError extends CountersignError { readonly requestId: string }
export declare class ApprovalRequired extends ApprovalError { readonly actionHash: string; readonly expiresAt: string }
export declare class ApprovalDenied extends ApprovalError { readonly approver: string; readonly note: string | null }
export declare class ApprovalMismatch extends ApprovalError { readonly approvedHash: string; readonly actionHash: string }
export declare class ApprovalConsumed extends ApprovalError {}
export declare class ApprovalExpired extends ApprovalError { readonly expiresAt: string }
export declare class ApprovalUnknown extends ApprovalError {}
export declare class ApprovalVoid extends ApprovalError {}
export declare class ApprovalOtherRun extends ApprovalError { readonly run: string | null }
export declare class ApprovalRevoked extends ApprovalError {}
export declare class ApprovalCancelled extends ApprovalError {}
export declare class NotRevocable extends ApprovalError { readonly state: string }
export declare class InterruptFailed extends ApprovalError { readonly framework: string; readonly detail: string }
export declare class AlreadyDecided extends ApprovalError { readonly state: string; readonly approver: string | null }
export declare class NoApprover extends CountersignError {}
/** The note kept with an answer or a revocation is longer than 4,096 bytes (UTF-8): nothing was recorded. */
export declare class NoteTooLong extends CountersignError { readonly bytes: number; readonly limit: number }
export declare class AnswerRefused extends CountersignError { readonly requestId: string }
export declare class SelfApproval extends AnswerRefused { readonly approver: string; readonly sharedGroup: string | null }
export declare class InvalidDecision extends AnswerRefused { readonly given: string }
/** The approver id is not `name` or `kind:name` (issue #19). */
export declare class InvalidApprover extends AnswerRefused { readonly given: string }
export declare class NotAuthenticated extends AnswerRefused { readonly approver: string | null }
export declare class NotEntitled extends AnswerRefused { readonly approver: string; readonly approvers: string }
export declare class AnswerMismatch extends AnswerRefused { readonly shown: string; readonly actionHash: string }
export declare class DuplicateEffect extends CountersignError { readonly effectKey: string; readonly inProgress: boolean }
export declare class AmbiguousEffect extends CountersignError { readonly effectKey: string }
/** Throw it from an executor when the effect definitely did not happen: a retry is allowed. */
export declare class NotExecuted extends CountersignError { readonly effectKey?: string | null; readonly detail?: string }
export declare class OutcomeUnknown extends CountersignError { readonly action: string; readonly effectKey: string | null; readonly detail: string }
export declare class StoreError extends CountersignError { readonly afterRun: boolean }
export declare class InternalError extends CountersignError {}
