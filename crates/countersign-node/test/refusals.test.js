'use strict'
// Every refusal the Node binding can raise, as its own CountersignError subclass with reason,
// didRun and mayRetry; execute with sync and async executors; answers; run scope and
// correlation; receipts and verification.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const cs = require('..')
const { open, scratch, POLICY } = require('./helpers.js')

const never = () => {
  throw new Error('the executor must not run')
}

/** Assert `promise` rejects with an instance of `Class` carrying `expected`; return the error. */
async function refused(promise, Class, expected = {}) {
  let caught
  await assert.rejects(promise, (error) => {
    caught = error
    return true
  })
  assert.ok(caught instanceof Class, `expected ${Class.name}, got ${caught?.name}: ${caught?.message}`)
  assert.ok(caught instanceof cs.CountersignError)
  assert.equal(caught.name, Class.name)
  for (const [name, value] of Object.entries(expected)) {
    assert.deepEqual(caught[name], value, `${Class.name}.${name}`)
  }
  return caught
}

async function pending(control, args, options = {}) {
  const error = await refused(
    control.execute('stripe.refund', args, never, options),
    cs.ApprovalRequired,
    { reason: 'approval_required', didRun: 'no', mayRetry: true },
  )
  assert.match(error.requestId, /^apr_/)
  assert.match(error.actionHash, /^sha256:[0-9a-f]{64}$/)
  return error.requestId
}

test('a sync executor runs once and an identical call is a duplicate', async () => {
  const { control } = await open()
  const done = await control.execute('stripe.refund', { payment_id: 'pi_1', amount: 5 },
    (args) => ({ refunded: args.amount }))
  assert.deepEqual(done.value, { refunded: 5 })
  assert.equal(done.receipt.outcome, 'committed')
  assert.equal(done.receipt.effect_key, 'refund:pi_1')
  await refused(
    control.execute('stripe.refund', { payment_id: 'pi_1', amount: 5 }, never),
    cs.DuplicateEffect,
    { reason: 'duplicate', didRun: 'no', mayRetry: false, effectKey: 'refund:pi_1', inProgress: false },
  )
})

test('an async executor gets the canonical arguments and its value comes back', async () => {
  const { control } = await open()
  let seen
  const done = await control.execute('stripe.refund', { amount: 1.0, payment_id: 'pi_2' },
    async (args) => {
      seen = args
      await new Promise((resolve) => setTimeout(resolve, 5))
      return new Map([['kept', 'as is']])
    })
  assert.deepEqual(seen, { amount: 1, payment_id: 'pi_2' })
  assert.ok(done.value instanceof Map, 'the value never crosses into Rust')
  const stored = (await control.receipts()).at(-1)
  assert.deepEqual(stored, done.receipt)
})

test('NotExecuted from an executor allows a retry; any other error makes the outcome unknown', async () => {
  const { control } = await open()
  const args = { payment_id: 'pi_3', amount: 5 }
  const notExecuted = await refused(
    control.execute('stripe.refund', args, () => {
      throw new cs.NotExecuted('connection refused before sending')
    }),
    cs.NotExecuted,
    { reason: 'not_executed', didRun: 'no', mayRetry: true, effectKey: 'refund:pi_3' },
  )
  assert.ok(notExecuted.cause instanceof cs.NotExecuted)
  const boom = new Error('timeout after the request went out')
  const unknown = await refused(
    control.execute('stripe.refund', args, async () => {
      throw boom
    }),
    cs.OutcomeUnknown,
    { reason: 'outcome_unknown', didRun: 'maybe', mayRetry: false, effectKey: 'refund:pi_3' },
  )
  assert.equal(unknown.cause, boom)
  await refused(control.execute('stripe.refund', args, never), cs.AmbiguousEffect, {
    reason: 'ambiguous', didRun: 'no', mayRetry: false, effectKey: 'refund:pi_3',
  })
  assert.equal((await control.effect('refund:pi_3')).state, 'ambiguous')
})

test('a timeout makes the outcome unknown', async () => {
  const { control } = await open()
  await refused(
    control.execute('mail.send', { message_id: 'm1' },
      () => new Promise((resolve) => setTimeout(resolve, 500)), { timeout: 0.05 }),
    cs.OutcomeUnknown,
    { didRun: 'maybe' },
  )
})

test('unknown and denied actions are ActionDenied with a receipt', async () => {
  const { control } = await open()
  const unknown = await refused(control.execute('rm.rf', {}, never), cs.ActionDenied, {
    reason: 'unknown_action', didRun: 'no', mayRetry: false, action: 'rm.rf',
  })
  assert.match(unknown.message, /rm\.rf/)
  await refused(
    control.execute('stripe.refund', { payment_id: 'pi_big', amount: 10_000_000 }, never),
    cs.ActionDenied,
  )
  const receipts = await control.receipts()
  assert.deepEqual(receipts.map((receipt) => receipt.outcome), ['refused', 'refused'])
})

test('unrepresentable arguments are InvalidArguments before anything is written', async () => {
  const { control } = await open()
  for (const [amount, canonicalReason] of [
    [NaN, 'not_finite'],
    [Infinity, 'not_finite'],
    [-0, 'negative_zero'],
    [9007199254740993n, 'unsafe_integer'],
  ]) {
    await refused(control.execute('stripe.refund', { payment_id: 'x', amount }, never),
      cs.InvalidArguments,
      { reason: 'invalid_arguments', didRun: 'no', mayRetry: false, canonicalReason })
  }
  for (const args of [
    { f: () => 1 },
    { s: Symbol('x') },
    { m: new Map() },
    { a: [1, undefined] },
    [1, 2],
    'text',
  ]) {
    await refused(control.evaluate('stripe.refund', args), cs.InvalidArguments,
      { reason: 'invalid_arguments', mayRetry: false })
  }
  const cyclic = { payment_id: 'x' }
  cyclic.self = cyclic
  await refused(control.evaluate('stripe.refund', cyclic), cs.InvalidArguments)
  assert.deepEqual(await control.receipts(), [])
})

test('a template the arguments cannot fill is BadTemplate', async () => {
  const { control } = await open()
  await refused(control.execute('stripe.refund', { amount: 5 }, never), cs.BadTemplate, {
    reason: 'bad_template', didRun: 'no', action: 'stripe.refund',
  })
})

test('a policy that does not load is PolicyError naming the line', async () => {
  const folder = scratch('schema: countersign.policy/v1\nactions:\n  x:\n    decison: allow\n')
  const error = await refused(
    cs.Control.open(path.join(folder, 'countersign.yaml'), { principal: 'agent:test' }),
    cs.PolicyError,
    { reason: 'policy_load', mayRetry: false },
  )
  assert.match(error.message, /countersign\.yaml:4:5: unknown key `decison`/)
})

test('a store that cannot open is StoreError', async () => {
  const folder = scratch(POLICY)
  fs.writeFileSync(path.join(folder, 'not-a-folder'), '')
  await refused(
    cs.Control.open(path.join(folder, 'countersign.yaml'), {
      principal: 'agent:test',
      storeUrl: `sqlite:${path.join(folder, 'not-a-folder', 'x.db')}`,
    }),
    cs.StoreError,
    { didRun: 'no', afterRun: false },
  )
})

test('misuse is a TypeError, not a refusal', async () => {
  const { control } = await open()
  await assert.rejects(control.approval('nope'), TypeError)
  await assert.rejects(cs.Control.open('x.yaml', {}), TypeError)
  await assert.rejects(control.execute('stripe.refund', { payment_id: 'x', amount: 1 }, 'not a function'), TypeError)
  await assert.rejects(
    control.requestApproval('stripe.refund', { payment_id: 'x', amount: 900 }, { correlation: 'call_1' }),
    TypeError,
  )
})

test('evaluate and needsApproval decide without writing', async () => {
  const { control } = await open()
  const allow = await control.evaluate('stripe.refund', { payment_id: 'x', amount: 5 })
  assert.equal(allow.decision, 'allow')
  assert.equal(allow.effectKey, 'refund:x')
  assert.equal(allow.policyHash, control.policyHash)
  assert.equal(await control.needsApproval('stripe.refund', { payment_id: 'x', amount: 5 }), false)
  assert.equal(await control.needsApproval('stripe.refund', { payment_id: 'x', amount: 900 }), true)
  assert.equal(await control.needsApproval('rm.rf', {}), false)
  assert.deepEqual(await control.receipts(), [])
  assert.deepEqual(await control.approvals(), [])
})

test('approved once, the identical call runs once; the approval is then consumed', async () => {
  const { control } = await open()
  const args = { payment_id: 'pi_a', amount: 900 }
  const id = await pending(control, args)
  const record = await control.approve(id, { approver: 'human:alice' })
  assert.equal(record.state, 'granted')
  assert.match(record.display, /stripe\.refund/)
  let runs = 0
  await control.execute('stripe.refund', args, () => ++runs, { approval: id })
  assert.equal(runs, 1)
  await refused(control.execute('stripe.refund', args, never, { approval: id }),
    cs.ApprovalConsumed, { reason: 'consumed', requestId: id, didRun: 'no' })
  assert.equal((await control.approval(id)).state, 'consumed')
})

test('an approval for other arguments is ApprovalMismatch', async () => {
  const { control } = await open()
  const id = await pending(control, { payment_id: 'pi_m', amount: 900 })
  await control.approve(id, { approver: 'human:alice' })
  const error = await refused(
    control.execute('stripe.refund', { payment_id: 'pi_m', amount: 901 }, never, { approval: id }),
    cs.ApprovalMismatch,
    { reason: 'mismatch', requestId: id, didRun: 'no', mayRetry: false },
  )
  assert.notEqual(error.approvedHash, error.actionHash)
})

test('a denial is ApprovalDenied with the note, and the call is not asked again', async () => {
  const { control } = await open()
  const args = { payment_id: 'pi_d', amount: 900 }
  const id = await pending(control, args)
  await control.deny(id, { approver: 'human:alice', note: 'not this one' })
  await refused(control.execute('stripe.refund', args, never), cs.ApprovalDenied, {
    reason: 'approval_denied', requestId: id, approver: 'human:alice', note: 'not this one', mayRetry: false,
  })
})

test('an unknown approval id is ApprovalUnknown', async () => {
  const { control } = await open()
  await refused(
    control.execute('stripe.refund', { payment_id: 'x', amount: 900 }, never, { approval: 'apr_aaaaaaaaaaaaaaaaaaaa' }),
    cs.ApprovalUnknown,
    { reason: 'unknown_request', requestId: 'apr_aaaaaaaaaaaaaaaaaaaa' },
  )
})

test('an expired approval is ApprovalExpired', async () => {
  const { control } = await open({ approvalTtl: 0.05 })
  const args = { payment_id: 'pi_e', amount: 900 }
  const id = await pending(control, args)
  await new Promise((resolve) => setTimeout(resolve, 120))
  await refused(control.approve(id, { approver: 'human:alice' }), cs.ApprovalExpired, {
    reason: 'expired', requestId: id,
  })
  await refused(control.execute('stripe.refund', args, never, { approval: id }), cs.ApprovalExpired, {
    reason: 'expired', requestId: id, mayRetry: true,
  })
})

test("an approval given under the action's old rules is ApprovalVoid", async () => {
  const folder = scratch(POLICY)
  const policyFile = path.join(folder, 'countersign.yaml')
  const first = await cs.Control.open(policyFile, { principal: 'agent:test' })
  const args = { payment_id: 'pi_v', amount: 900 }
  const id = await pending(first, args)
  await first.approve(id, { approver: 'human:alice' })
  fs.writeFileSync(policyFile, POLICY.replace('lte: 100000', 'lte: 200000'))
  const changed = await cs.Control.open(policyFile, { principal: 'agent:test' })
  await refused(changed.execute('stripe.refund', args, never, { approval: id }), cs.ApprovalVoid, {
    reason: 'policy_changed', requestId: id, mayRetry: true,
  })
})

test("a run's approval does not leak to another run (ApprovalOtherRun)", async () => {
  const { control } = await open()
  const args = { payment_id: 'pi_r', amount: 900 }
  const first = await pending(control, args, { run: 'r1' })
  const second = await pending(control, args, { run: 'r2' })
  assert.notEqual(first, second)
  assert.equal((await control.approve(first, { approver: 'human:alice' })).run, 'r1')
  await refused(control.execute('stripe.refund', args, never, { run: 'r2', approval: first }),
    cs.ApprovalOtherRun, { reason: 'other_run', requestId: first, run: 'r1', mayRetry: true })
  let runs = 0
  await control.execute('stripe.refund', args, () => ++runs, { run: 'r1' })
  assert.equal(runs, 1)
})

test('correlated calls get their own requests and read back; a reused call id is refused', async () => {
  const { control } = await open()
  const args = { payment_id: 'pi_c', amount: 900 }
  const one = await control.requestApproval('stripe.refund', args, { run: 'r1', correlation: { framework: 'toy', callId: 'c1' } })
  const two = await control.requestApproval('stripe.refund', args, { run: 'r1', correlation: { framework: 'toy', callId: 'c2' } })
  assert.notEqual(one.requestId, two.requestId)
  assert.equal(one.state, 'pending')
  assert.equal((await control.correlated('toy', 'r1', 'c1')).requestId, one.requestId)
  assert.equal(await control.correlated('toy', 'r2', 'c1'), null)
  assert.equal(await control.requestApproval('stripe.refund', { payment_id: 'x', amount: 5 }), null)
  await control.approve(one.requestId, { approver: 'human:alice' })
  await refused(
    control.execute('stripe.refund', { payment_id: 'pi_other', amount: 901 }, never,
      { run: 'r1', correlation: { framework: 'toy', callId: 'c1' } }),
    cs.ApprovalMismatch,
    { reason: 'mismatch' },
  )
})

test('answers are judged: NoApprover, SelfApproval, InvalidDecision, NoteTooLong, NotEntitled, NotAuthenticated, AnswerMismatch, AlreadyDecided', async () => {
  const { control } = await open()
  const id = await pending(control, { payment_id: 'pi_q', amount: 900 })
  await refused(control.approve(id), cs.NoApprover, { reason: 'no_approver', didRun: 'no' })
  await refused(control.approve(id, { approver: 'agent:test' }), cs.SelfApproval, {
    reason: 'self_approval', requestId: id, approver: 'agent:test', mayRetry: true,
  })
  for (const decision of [null, true, 1, 'yes', 'Approve', {}]) {
    await refused(control.answer(id, decision, { approver: 'human:alice' }), cs.InvalidDecision, {
      reason: 'invalid_decision', requestId: id, mayRetry: true,
    })
  }
  await refused(control.approve(id, { approver: 'human:alice', actionHash: `sha256:${'0'.repeat(64)}` }),
    cs.AnswerMismatch, { reason: 'mismatch', requestId: id })
  // The kernel's note limit: 4,096 bytes of UTF-8 (2,049 two-byte characters are 4,098).
  await refused(control.approve(id, { approver: 'human:alice', note: 'é'.repeat(2049) }), cs.NoteTooLong, {
    reason: 'note_too_long', bytes: 4098, limit: 4096, mayRetry: true,
  })
  assert.equal((await control.approval(id)).state, 'pending')
  await control.deny(id, { approver: 'human:alice' })
  await refused(control.approve(id, { approver: 'human:bob' }), cs.AlreadyDecided, {
    reason: 'already_decided', requestId: id, state: 'denied', approver: 'human:alice',
  })

  const transfer = await refused(control.execute('finance.transfer', { transfer_id: 't1' }, never), cs.ApprovalRequired)
  await refused(control.approve(transfer.requestId, { approver: 'human:mallory' }), cs.NotEntitled, {
    reason: 'not_entitled', approver: 'human:mallory',
  })
  const oneOfTwo = await control.approve(transfer.requestId, { approver: 'human:alice' })
  assert.deepEqual([oneOfTwo.state, oneOfTwo.approvalsGiven, oneOfTwo.quorum], ['pending', 1, 2])
  assert.equal(oneOfTwo.approvers, 'group:finance (2 of them)')
  assert.equal((await control.approve(transfer.requestId, { approver: 'human:bob' })).state, 'granted')

  const vault = await refused(control.execute('vault.open', {}, never), cs.ApprovalRequired)
  await refused(control.approve(vault.requestId, { approver: 'human:alice' }), cs.NotAuthenticated, {
    reason: 'not_authenticated', mayRetry: true,
  })
  await refused(control.approve(vault.requestId, { token: 'not.a.token' }), cs.NotAuthenticated)
})

test('the receipt chain verifies', async () => {
  const { control } = await open()
  assert.equal((await control.verifyReceipts()).outcome, 'unverifiable', 'an empty log is no pass')
  await control.execute('stripe.refund', { payment_id: 'pi_v1', amount: 5 }, () => 'ok')
  await control.execute('rm.rf', {}, never).catch(() => {})
  const report = await control.verifyReceipts()
  assert.equal(report.checked, 2)
  assert.equal(report.first_break, null)
  assert.equal(report.outcome, 'verified')
  assert.equal(report.first_seq, 1)
})

test('every refusal class is exported with its default reason', () => {
  const expected = {
    PolicyError: 'policy_load', InvalidArguments: 'invalid_arguments', BadTemplate: 'bad_template',
    NoPrincipal: 'no_principal', ActionDenied: 'denied', ApprovalRequired: 'approval_required',
    ApprovalDenied: 'approval_denied', ApprovalMismatch: 'mismatch', ApprovalConsumed: 'consumed',
    ApprovalExpired: 'expired', ApprovalUnknown: 'unknown_request', ApprovalVoid: 'policy_changed',
    ApprovalOtherRun: 'other_run', ApprovalRevoked: 'revoked', ApprovalCancelled: 'cancelled',
    NotRevocable: 'not_revocable', InterruptFailed: 'interrupt_failed', AlreadyDecided: 'already_decided',
    NoApprover: 'no_approver', NoteTooLong: 'note_too_long', AnswerRefused: 'answer_refused', SelfApproval: 'self_approval',
    InvalidDecision: 'invalid_decision', NotAuthenticated: 'not_authenticated', NotEntitled: 'not_entitled',
    AnswerMismatch: 'mismatch', DuplicateEffect: 'duplicate', AmbiguousEffect: 'ambiguous',
    NotExecuted: 'not_executed', OutcomeUnknown: 'outcome_unknown', StoreError: 'store', InternalError: 'internal',
  }
  for (const [name, reason] of Object.entries(expected)) {
    const error = new cs[name]('message')
    assert.ok(error instanceof cs.CountersignError, name)
    assert.equal(error.reason, reason, name)
    assert.equal(error.name, name)
  }
  assert.ok(new cs.SelfApproval('x') instanceof cs.AnswerRefused)
  assert.ok(new cs.ApprovalRequired('x') instanceof cs.ApprovalError)
})

test('the Reason codes are the kernel\'s closed set (issue #19)', () => {
  assert.deepEqual(Object.values(cs.Reason), cs._native.reasons())
  assert.ok(Object.isFrozen(cs.Reason))
  assert.equal(cs.Reason.INVALID_APPROVER, 'invalid_approver')
})

test('a malformed approver name is refused with the expected shape, and changes nothing', async () => {
  const { control } = await open()
  const requestId = await pending(control, { payment_id: 'pi_shape', amount: 5000 })
  for (const approver of ['human:', ':', 'human: bob']) {
    const error = await refused(control.approve(requestId, { approver }), cs.InvalidApprover, {
      reason: 'invalid_approver',
      didRun: 'no',
    })
    assert.match(error.message, /is not an approver id/)
    assert.match(error.message, /`human:alice`/)
  }
  const record = await control.approval(requestId)
  assert.equal(record.state, 'pending')
})
