'use strict'
// The one place this adapter names kernel refusals and approval states. Everything the adapter
// decides from a refusal's class or a request's state is a lookup in this file, so a rename in
// the binding (issue #19: a human's no is `deny` everywhere) is a change here only.
//
// Two kinds of outcome reach the model as text instead of an exception: a call that did not run
// because a human said no, because its approval expired, or because it still waits for a human.
// The model must read them as "the tool did not run" (case B34). Every other kernel refusal is
// thrown and reaches the caller of `run()` as itself.

const { ApprovalDenied, ApprovalExpired, ApprovalRequired } = require('@countersign/node')

/**
 * The model-facing statuses. `rejected` is the wire word the Python adapter's results use too;
 * it stays whatever the binding calls a human's no.
 * @type {Readonly<Record<'denied' | 'expired' | 'pending', 'rejected' | 'expired' | 'pending'>>}
 */
const STATUS = Object.freeze({ denied: 'rejected', expired: 'expired', pending: 'pending' })

/**
 * Kernel refusals that become a model-facing result, with its status (siblings: order does not
 * matter). `ApprovalVoid` (the policy changed) is thrown at invocation, as in the Python adapter;
 * a paused call whose request went void is answered `expired` on resume (`ON_RESUME`).
 */
const MODEL_FACING = [
  [ApprovalDenied, STATUS.denied],
  [ApprovalExpired, STATUS.expired],
  [ApprovalRequired, STATUS.pending],
]

/**
 * The model-facing status for a kernel refusal, or `null` when the refusal must be thrown.
 * @param {unknown} refusal
 * @returns {'rejected' | 'expired' | 'pending' | null}
 */
function modelFacingStatus(refusal) {
  for (const [Class, status] of MODEL_FACING) {
    if (refusal instanceof Class) return status
  }
  return null
}

/**
 * What a restored run does with a paused call, by the state of the kernel request the store maps
 * it to (`ApprovalRequest.state`):
 * - `wait`: still pending; the call stays paused;
 * - `approve`: approved in the SDK's run state (a used grant too, so the kernel refuses the
 *   replay `consumed` when the tool is invoked);
 * - `refuse`: presented to the kernel once (a refusal receipt) and rejected in the SDK's run
 *   state with the model-facing result of `status`.
 * A state not listed here (a kernel newer than this table) is refused as `expired`: fail closed.
 */
const ON_RESUME = Object.freeze({
  pending: Object.freeze({ step: 'wait' }),
  granted: Object.freeze({ step: 'approve' }),
  consumed: Object.freeze({ step: 'approve' }),
  denied: Object.freeze({ step: 'refuse', status: STATUS.denied }),
  expired: Object.freeze({ step: 'refuse', status: STATUS.expired }),
  void: Object.freeze({ step: 'refuse', status: STATUS.expired }),
})

/** @param {string} state */
function onResume(state) {
  return Object.hasOwn(ON_RESUME, state) ? ON_RESUME[state] : { step: 'refuse', status: STATUS.expired }
}

/**
 * Request states in which the SDK should pause (or keep its own approval flag): a human may
 * still answer, or already said yes and the kernel checks the grant when the tool runs. Any other
 * state is decided by the kernel at invocation without a human.
 */
const ASKS_A_HUMAN = new Set(['pending', 'granted'])

/**
 * The state of a request whose approval is complete (a quorum's last yes given): only then is
 * the call approved in the SDK's run state.
 */
const GRANTED = 'granted'

module.exports = { STATUS, modelFacingStatus, onResume, ASKS_A_HUMAN, GRANTED }
