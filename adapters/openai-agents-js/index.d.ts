// TypeScript declarations of `@countersign/openai-agents` (index.js).

import { CountersignError } from '@countersign/node'
import type { ApprovalRequest, CanonicalArguments, Control } from '@countersign/node'
import type { Agent, FunctionTool, RunContext, RunResult, RunState, RunToolApprovalItem } from '@openai/agents'

export { NotExecuted } from '@countersign/node'

/** The framework name the kernel's store keys call correlations by: `openai-agents-js`. */
export declare const FRAMEWORK: 'openai-agents-js'
/** The envelope `Gate.saveState` writes: `countersign.openai-agents-js.run-state/v1`. */
export declare const RUN_STATE_SCHEMA: 'countersign.openai-agents-js.run-state/v1'

/** Why a gated call did not run, as the model reads it. */
export type NotExecutedStatus = 'rejected' | 'expired' | 'pending'

/**
 * The model-facing result of a call that did not run, as JSON text of
 * `{ status, executed: false, tool, message, request_id?, reviewer_note? }`.
 */
export declare function notExecutedResult(
  status: NotExecutedStatus,
  tool: string,
  options?: { requestId?: string | null; reviewerNote?: string | null },
): string

/** The Countersign refusal inside an error the SDK threw (its `ToolCallError`), or `null`. */
export declare function unwrap(error: unknown): CountersignError | null

/** Base class of this adapter's own refusals. */
export declare class AdapterError extends CountersignError {}
/** A paused call has no kernel request mapped to it for this run; nothing ran. */
export declare class DecisionNotFound extends AdapterError {
  readonly tool: string
  readonly callId: string
  readonly run: string | null
}
/** The framework dropped a decision applied to its run state; nothing ran. */
export declare class DecisionNotApplied extends AdapterError {
  readonly tool: string
  readonly callId: string
  readonly requestId: string
}

/** A paused call of a gated tool, with the kernel request it is bound to. */
export interface PendingCall {
  /** The SDK's approval item. */
  readonly item: RunToolApprovalItem
  readonly tool: string
  /** The kernel action. */
  readonly action: string
  readonly callId: string
  /** What the run state holds now; show the human `request.arguments`, what the answer binds to. */
  readonly arguments: unknown
  readonly request: ApprovalRequest
}

/** The options of `gate.tool()`: the SDK's `tool()` options, less what the gate decides. */
export interface GatedToolOptions<Context = unknown, Result = unknown> {
  /** The tool name the model sees. */
  name: string
  description: string
  /** A JSON schema (or a zod object) of the arguments. */
  parameters: unknown
  strict?: boolean
  /** The kernel action (default: `name`). */
  action?: string
  /** Seconds the function may run; past it the outcome is unknown (`OutcomeUnknown`). */
  timeout?: number
  /** Runs with the canonical arguments: exactly what was hashed and approved. */
  execute: (args: CanonicalArguments, runContext?: RunContext<Context>, details?: unknown) => Result | Promise<Result>
  /** Any other option of the SDK's `tool()` is passed through, except `needsApproval` and `errorFunction`. */
  [option: string]: unknown
}

export interface AnswerOptions {
  /** An asserted approver name, passed by the operator (never read from the run state). */
  approver?: string
  /** An approver token (`countersign approver token`). */
  token?: string
  note?: string
}

/** Countersign for one kernel `Control`, in the OpenAI Agents SDK for JavaScript. */
export declare class Gate {
  constructor(control: Control)
  readonly control: Control
  /** A policy-gated `FunctionTool`. */
  tool<Context = unknown, Result = unknown>(options: GatedToolOptions<Context, Result>): FunctionTool<Context, any, any>
  /** The tools whose action the policy can ever let run, for the principal the gate's `Control` acts as. */
  guardTools<T>(tools: T[], principal: string): T[]
  /** The SDK's `run()` with Countersign's rules (not streamed); rejects with kernel refusals as themselves. */
  run<TAgent extends Agent<any, any>>(
    agent: TAgent,
    input: string | unknown[] | RunState<any, TAgent>,
    options?: { runId?: string; [option: string]: unknown },
  ): Promise<RunResult<any, TAgent>>
  /** The gate's run id of a run result or run state, or `null`. */
  runId(source: RunResult<any, any> | RunState<any, any>): string | null
  /** The run state with its run id, as text for `loadState`. */
  saveState(source: RunResult<any, any> | RunState<any, any>): string
  /** Restore a state written by `saveState` (`RunState.fromString` inside). */
  loadState<TAgent extends Agent<any, any>>(agent: TAgent, text: string): Promise<RunState<any, TAgent>>
  /** The paused calls of gated tools, each with its kernel request. */
  pending(source: RunResult<any, any> | RunState<any, any>): Promise<PendingCall[]>
  /** Record a yes in the kernel; once granted, approve the call in the run state. */
  approve(
    state: RunState<any, any>,
    call: PendingCall | RunToolApprovalItem,
    options: AnswerOptions & { always?: boolean },
  ): Promise<ApprovalRequest>
  /** Record a no in the kernel; reject the call in the run state with the `rejected` result. */
  deny(state: RunState<any, any>, call: PendingCall | RunToolApprovalItem, options: AnswerOptions): Promise<ApprovalRequest>
  /** Apply the answers the kernel holds to a restored run state; the calls still pending. */
  resolveInterruptions(state: RunState<any, any> | RunResult<any, any>): Promise<PendingCall[]>
  /** The kernel refusal behind a model-facing result of `callId` (this process), or `null`. */
  refusal(callId: string): CountersignError | null
}
