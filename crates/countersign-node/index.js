'use strict'
// Countersign for Node.js: policy, single-use approvals, at-most-once effects and hash-chained
// receipts for AI agents' tool calls. The kernel is Rust (the `countersign` crate); this package
// is its native binding (napi-rs), the same surface as the Python binding.
//
//   const { Control } = require('@countersign/node')
//   const control = await Control.open('countersign.yaml', { principal: 'agent:support-bot' })
//   const { value, receipt } = await control.execute('stripe.refund', { payment_id: 'pi_1', amount: 500 },
//     async (args) => refund(args))
//
// Every kernel call runs off Node's main thread (napi-rs's Tokio runtime); the executor runs on
// the event loop. Every refusal is a `CountersignError` subclass with `reason`, `didRun`,
// `mayRetry` (see errors.js).

const path = require('node:path')
const errors = require('./errors.js')
const { fromNative, InvalidArguments, NotExecuted } = errors

const addon = path.join(__dirname, `countersign.${process.platform}-${process.arch}-gnu.node`)
let native
try {
  native = require(addon)
} catch (error) {
  throw new Error(
    `cannot load the Countersign addon \`${addon}\`: ${error.message}; only linux-x64-gnu is built today: build it with \`npx napi build --platform --no-js --release\` in ${__dirname}`,
    { cause: error },
  )
}

/**
 * Arguments as JSON text for the kernel's strict parser, never silently changed: `NaN`,
 * `Infinity` and `-0` are written as tokens the kernel refuses (`invalid_arguments`), a
 * `bigint` as its decimal digits (so an integer beyond ±(2^53−1) meets the kernel's one integer
 * rule), `toJSON` is honoured (a `Date` becomes its ISO string), an `undefined` object member is
 * left out (as `JSON.stringify` does). Refused here, as `InvalidArguments`: a value that is not
 * a plain object at the top, functions, symbols, `undefined` in an array, class instances
 * without `toJSON` (a `Map`, a `Set`, a typed array), and cycles.
 * @param {unknown} args
 * @returns {string}
 */
function argumentsJson(args) {
  if (args instanceof RawArguments) {
    // The kernel's strict reader parses it: duplicates, depth and the rest are its refusals.
    return args.text
  }
  if (args === null || typeof args !== 'object' || Array.isArray(args)) {
    throw refuse('', `arguments must be an object of names to JSON values, not ${describe(args)}`)
  }
  return write(args, '', new Set())
}

/**
 * The JSON text of a tool call's arguments exactly as the framework received it (for example
 * the OpenAI function-call `arguments` string), handed to the kernel unparsed: its strict reader
 * refuses what a parsed object can no longer show — a key written twice (`JSON.parse` keeps the
 * last, case B52), nesting past 64 levels, a lone surrogate escape, an integer outside
 * ±(2^53−1), text past 4 MiB (`InvalidArguments` with `canonicalReason`). Accepted wherever a
 * method takes `args`.
 *
 * A JavaScript string can hold a lone surrogate that no UTF-8 text can: such text is refused
 * here, locally, as `InvalidArguments` (`canonicalReason: 'lone_surrogate'`), never replaced by
 * U+FFFD (case B51).
 */
class RawArguments {
  /** @param {string} text */
  constructor(text) {
    if (typeof text !== 'string') {
      throw new TypeError(`RawArguments needs the JSON text as a string, not ${describe(text)}`)
    }
    if (!text.isWellFormed()) {
      throw new InvalidArguments(
        'not executed: the arguments text holds a lone surrogate, which UTF-8 cannot carry: send a valid surrogate pair',
        { action: '', detail: 'lone surrogate', canonicalReason: 'lone_surrogate' },
      )
    }
    this.text = text
    Object.freeze(this)
  }
}

function describe(value) {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  if (typeof value === 'object') return `a ${value.constructor?.name ?? 'null-prototype object'}`
  return `a ${typeof value}`
}

function refuse(at, detail) {
  return new InvalidArguments(
    `not executed: arguments are not representable as JSON at ${at === '' ? 'the top level' : `\`${at}\``}: ${detail}`,
    { action: '', detail },
  )
}

function write(value, at, ancestors) {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value)
    case 'boolean':
      return value ? 'true' : 'false'
    case 'bigint':
      return value.toString()
    case 'number':
      if (Number.isNaN(value)) return 'NaN'
      if (value === Infinity) return 'Infinity'
      if (value === -Infinity) return '-Infinity'
      if (Object.is(value, -0)) return '-0'
      return JSON.stringify(value)
    case 'object':
      break
    default:
      throw refuse(at, `${describe(value)} is not a JSON value`)
  }
  if (value === null) return 'null'
  if (ancestors.has(value)) throw refuse(at, 'the value contains itself (a cycle)')
  if (typeof value.toJSON === 'function') return write(value.toJSON(), at, ancestors)
  ancestors.add(value)
  try {
    if (Array.isArray(value)) {
      const items = value.map((item, index) => {
        if (item === undefined) throw refuse(`${at}/${index}`, 'undefined is not a JSON value')
        return write(item, `${at}/${index}`, ancestors)
      })
      return `[${items.join(',')}]`
    }
    const prototype = Object.getPrototypeOf(value)
    if (prototype !== Object.prototype && prototype !== null) {
      throw refuse(at, `${describe(value)} is not a plain object and has no toJSON()`)
    }
    const members = []
    for (const [key, member] of Object.entries(value)) {
      if (member === undefined) continue
      const where = `${at}/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`
      members.push(`${JSON.stringify(key)}:${write(member, where, ancestors)}`)
    }
    return `{${members.join(',')}}`
  } finally {
    ancestors.delete(value)
  }
}

/** Await a native call and turn its rejection into the matching error. */
async function call(promise) {
  try {
    return await promise
  } catch (error) {
    throw fromNative(error)
  }
}

function correlationOf(correlation) {
  if (correlation === undefined || correlation === null) return [undefined, undefined]
  const { framework, callId } = correlation
  if (typeof framework !== 'string' || typeof callId !== 'string') {
    throw new TypeError(
      "correlation must be { framework, callId }, two strings, such as { framework: 'openai-agents', callId: 'call_1' }",
    )
  }
  return [framework, callId]
}

function ruleSummary(rule) {
  const approvers = rule.approvers && rule.approvers.length > 0 ? rule.approvers : ['*']
  let text = approvers.includes('*') ? 'anyone but the requester' : approvers.join(', ')
  if ((rule.quorum ?? 1) > 1) text += ` (${rule.quorum} of them)`
  if (rule.require === 'authenticated') text += ', authenticated'
  if (rule.distinct_from_requester) text += ", not the requester's groups"
  return text
}

/** One approval request as stored by the kernel (see `ApprovalRequest` in index.d.ts). */
function approvalRequest(text) {
  const record = typeof text === 'string' ? JSON.parse(text) : text
  const rule = record.rule ?? {}
  return Object.freeze({
    requestId: record.id,
    action: record.action,
    actionHash: record.action_hash,
    arguments: record.arguments,
    principal: record.principal,
    resource: record.resource ?? null,
    environment: record.environment,
    effectKey: record.effect_key ?? null,
    state: record.state,
    createdAt: record.created_at,
    expiresAt: record.expires_at,
    answeredAt: record.answered_at ?? null,
    approver: record.approver ?? null,
    note: record.note ?? null,
    consumedAt: record.consumed_at ?? null,
    approvalsGiven: (record.answers ?? []).filter((answer) => answer.decision === 'approve').length,
    quorum: rule.quorum ?? 1,
    approvers: ruleSummary(rule),
    run: record.run ?? null,
    display: record.display ?? '',
  })
}

function evaluation(text) {
  const raw = JSON.parse(text)
  return Object.freeze({
    action: raw.action,
    decision: raw.decision,
    reason: raw.reason,
    actionHash: raw.action_hash,
    effectKey: raw.effect_key ?? null,
    resource: raw.resource ?? null,
    mode: raw.mode,
    policyHash: raw.policy_hash,
  })
}

/** The kernel for one policy, one store and one principal. Make one with `Control.open`. */
class Control {
  #native
  /** @type {string | null} */
  principal

  /** @private Use `Control.open`. */
  constructor(nativeControl, principal) {
    if (!(nativeControl instanceof native.NativeControl)) {
      throw new TypeError('use `await Control.open(policy, { principal })` to make a Control')
    }
    this.#native = nativeControl
    this.principal = principal
  }

  /**
   * Open the kernel: `policy` is the policy file; `principal` who is acting (vouched for by the
   * application, never taken from model output); `storeUrl` `sqlite:PATH` (default:
   * `.countersign/countersign.db` beside the policy), `memory:` or `postgres://…`;
   * `approvalTtl` seconds an approval request stays answerable.
   */
  static async open(policy, { principal, storeUrl, approvalTtl } = {}) {
    if (typeof principal !== 'string') {
      throw new TypeError("Control.open needs { principal: 'agent:…' }: who is acting, as a string")
    }
    const opened = await call(native.openControl(String(policy), principal, storeUrl, approvalTtl))
    // Issue #31: an approval nobody can give is said when the store opens, not after every
    // request it opens has expired.
    for (const line of opened.approvalWarnings) {
      process.emitWarning(`${policy}: ${line}`, { type: 'ApprovalWarning', code: 'COUNTERSIGN_APPROVAL' })
    }
    return new Control(opened, principal)
  }

  /** @private A Control around a kernel built in Rust by its operator (the conformance kit's). */
  static _adopt(nativeControl) {
    return new Control(nativeControl, null)
  }

  get storeUrl() {
    return this.#native.storeUrl
  }

  get policyPath() {
    return this.#native.policyPath
  }

  get mode() {
    return this.#native.mode
  }

  get policyHash() {
    return this.#native.policyHash
  }

  async evaluate(action, args) {
    return evaluation(await call(this.#native.evaluate(action, argumentsJson(args))))
  }

  /**
   * Can the policy ever let `action` run? `true` in observe mode, and in enforce mode when the
   * action's entry can give `allow` or `approve` for some arguments; `false` for an unlisted
   * action and for one whose rules all deny. Reads the loaded policy; writes nothing.
   * @param {string} action
   * @returns {boolean}
   */
  canPermit(action) {
    if (typeof action !== 'string') throw new TypeError('canPermit needs the action name as a string')
    return this.#native.canPermit(action)
  }

  async needsApproval(action, args) {
    return call(this.#native.needsApproval(action, argumentsJson(args)))
  }

  async requestApproval(action, args, { run, correlation } = {}) {
    const [framework, callId] = correlationOf(correlation)
    const text = await call(
      this.#native.requestApproval(action, argumentsJson(args), run, framework, callId),
    )
    return text === null ? null : approvalRequest(text)
  }

  async execute(action, args, executor, { approval, timeout, run, correlation } = {}) {
    if (typeof executor !== 'function') {
      throw new TypeError('execute needs an executor: a function of the canonical arguments')
    }
    const text = argumentsJson(args)
    const [framework, callId] = correlationOf(correlation)
    // The executor's value and error stay here; the kernel only learns how the call ended.
    const slot = { ran: false, value: undefined, error: undefined }
    const bridge = async (canonical) => {
      slot.ran = true
      try {
        slot.value = await executor(JSON.parse(canonical))
        return '{"ok":true}'
      } catch (error) {
        slot.error = error
        const message = error instanceof Error ? error.message : String(error)
        const kind = error instanceof Error ? error.name : typeof error
        return JSON.stringify({
          ok: false,
          not_executed: error instanceof NotExecuted,
          message: error instanceof NotExecuted ? message : `${kind}: ${message}`,
        })
      }
    }
    let receipt
    try {
      receipt = await this.#native.execute(
        action, text, bridge, approval, timeout, run, framework, callId,
      )
    } catch (error) {
      throw fromNative(error, slot.error)
    }
    return Object.freeze({ value: slot.value, receipt: JSON.parse(receipt) })
  }

  async answer(requestId, decision, { approver, token, actionHash, note } = {}) {
    let decisionJson
    try {
      decisionJson = JSON.stringify(decision) ?? JSON.stringify(String(decision))
    } catch {
      decisionJson = JSON.stringify(String(decision))
    }
    return approvalRequest(
      await call(this.#native.answer(requestId, decisionJson, approver, note, token, actionHash)),
    )
  }

  async approve(requestId, options = {}) {
    return this.answer(requestId, 'approve', options)
  }

  async deny(requestId, options = {}) {
    return this.answer(requestId, 'deny', options)
  }

  /**
   * Take back a grant not yet used (the request becomes `revoked`), or withdraw your counted
   * yes from a quorum still pending. Who revokes is `token`, or else `approver` (asserted).
   */
  async revoke(requestId, { approver, token, reason } = {}) {
    return approvalRequest(
      await call(this.#native.withdraw(requestId, false, approver, token, reason)),
    )
  }

  /** Cancel a waiting (or granted, unused) request as the operator: it becomes `cancelled`. */
  async cancel(requestId, { operator, reason } = {}) {
    if (typeof operator !== 'string') {
      throw new TypeError("cancel needs { operator: 'ops:…' }: who cancels, as a string")
    }
    return approvalRequest(
      await call(this.#native.withdraw(requestId, true, operator, undefined, reason)),
    )
  }

  /**
   * Cancel every waiting request of an abandoned run. Resolves to `[requestId, outcome]` pairs,
   * oldest first: the cancelled request, or the refusal (an error instance, not thrown) for a
   * request that changed meanwhile.
   */
  async cancelRun(run, { operator, reason } = {}) {
    if (typeof operator !== 'string') {
      throw new TypeError("cancelRun needs { operator: 'ops:…' }: who cancels, as a string")
    }
    const items = JSON.parse(await call(this.#native.cancelRun(String(run), operator, reason)))
    return items.map((item) => [
      item.request_id,
      item.request ? approvalRequest(item.request) : fromNative(new Error(item.refusal)),
    ])
  }

  /**
   * Put an approver token (its id `tok_…` or the whole token) on the store's deny-list: every
   * answer presenting it is refused `NotAuthenticated`. Resolves to false when it already was.
   */
  async revokeToken(token, { operator, reason } = {}) {
    if (typeof operator !== 'string') {
      throw new TypeError("revokeToken needs { operator: 'ops:…' }: who revokes, as a string")
    }
    return call(this.#native.revokeToken(String(token), operator, reason))
  }

  async correlated(framework, run, callId) {
    const text = await call(this.#native.correlated(framework, run ?? null, callId))
    return text === null ? null : approvalRequest(text)
  }

  async approval(requestId) {
    const text = await call(this.#native.approval(requestId))
    return text === null ? null : approvalRequest(text)
  }

  async approvals(state) {
    return JSON.parse(await call(this.#native.approvals(state))).map(approvalRequest)
  }

  async effect(key) {
    const text = await call(this.#native.effect(key))
    return text === null ? null : JSON.parse(text)
  }

  async receipts() {
    return JSON.parse(await call(this.#native.receipts()))
  }

  async verifyReceipts() {
    return JSON.parse(await call(this.#native.verifyReceipts()))
  }
}

module.exports = {
  Control,
  RawArguments,
  errors,
  ...Object.fromEntries(Object.entries(errors).filter(([name]) => name !== 'fromNative')),
  _native: native,
  _argumentsJson: argumentsJson,
}
