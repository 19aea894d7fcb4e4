'use strict'
// Taking it back from Node (issue #31): revoke a grant, cancel a request or a whole run, revoke
// an approver token, and the ApprovalWarning a policy nobody can answer gives on open.

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const cs = require('..')
const { open, scratch } = require('./helpers.js')

const never = () => {
  throw new Error('the executor must not run')
}

async function ask(control, paymentId, run) {
  try {
    await control.execute('stripe.refund', { payment_id: paymentId, amount: 900 }, never, { run })
  } catch (error) {
    assert.ok(error instanceof cs.ApprovalRequired, `${error?.name}: ${error?.message}`)
    return error.requestId
  }
  assert.fail('the call should have waited for approval')
}

test('a revoked grant is refused revoked and a used one cannot be revoked', async () => {
  const { control } = await open()
  const id = await ask(control, 'pi_rv')
  await control.approve(id, { approver: 'human:alice' })
  const revoked = await control.revoke(id, { approver: 'human:alice', reason: 'wrong payment' })
  assert.equal(revoked.state, 'revoked')
  await assert.rejects(
    control.execute('stripe.refund', { payment_id: 'pi_rv', amount: 900 }, never, { approval: id }),
    (error) => error instanceof cs.ApprovalRevoked && error.reason === 'revoked',
  )
  const used = await ask(control, 'pi_used')
  await control.approve(used, { approver: 'human:alice' })
  await control.execute('stripe.refund', { payment_id: 'pi_used', amount: 900 }, () => 'ok', { approval: used })
  await assert.rejects(
    control.revoke(used, { approver: 'human:alice' }),
    (error) => error instanceof cs.ApprovalConsumed && error.reason === 'consumed',
  )
})

test('cancelRun clears only that run and reports each request', async () => {
  const { control } = await open()
  const first = await ask(control, 'pi_1', 'run-a')
  const second = await ask(control, 'pi_2', 'run-a')
  const other = await ask(control, 'pi_3', 'run-b')
  await control.deny(second, { approver: 'human:alice' })
  const done = await control.cancelRun('run-a', { operator: 'ops:dana', reason: 'abandoned' })
  assert.deepEqual(done.map(([id]) => id), [first])
  assert.equal(done[0][1].state, 'cancelled')
  assert.equal((await control.approval(other)).state, 'pending')
  assert.deepEqual(await control.cancelRun('run-a', { operator: 'ops:dana' }), [])
  await assert.rejects(
    control.approve(first, { approver: 'human:alice' }),
    (error) => error instanceof cs.ApprovalCancelled,
  )
  const single = await control.cancel(other, { operator: 'ops:dana' })
  assert.equal(single.state, 'cancelled')
  await assert.rejects(control.cancel(other, {}), TypeError)
})

test('revokeToken takes an id, says when it already was, and refuses other text', async () => {
  const { control } = await open()
  const jti = 'tok_abcdefghijklmnopqrst'
  assert.equal(await control.revokeToken(jti, { operator: 'ops:dana', reason: 'leaked' }), true)
  assert.equal(await control.revokeToken(jti, { operator: 'ops:dana' }), false)
  for (const bad of ['', 'tok_short', 'not a token']) {
    await assert.rejects(control.revokeToken(bad, { operator: 'ops:dana' }), /tok_/)
  }
})

test('a policy nobody can answer warns on open, naming the line', async () => {
  const folder = scratch(`schema: countersign.policy/v1
environment: test
directory:
  human:alice: [support]
actions:
  stripe.refund:
    decision: approve
    approval: { approvers: ["group:finance"] }
`)
  const seen = []
  const listener = (warning) => seen.push(warning)
  process.on('warning', listener)
  try {
    await cs.Control.open(path.join(folder, 'countersign.yaml'), { principal: 'agent:test' })
    await new Promise((resolve) => setImmediate(resolve))
  } finally {
    process.off('warning', listener)
  }
  const ours = seen.filter((warning) => warning.name === 'ApprovalWarning')
  const messages = ours.map((warning) => warning.message)
  assert.ok(
    messages.some((message) => /line 6: `stripe\.refund`: nobody can answer/.test(message)),
    JSON.stringify(messages),
  )
  assert.ok(ours.every((warning) => warning.code === 'COUNTERSIGN_APPROVAL'))
})
