'use strict'
// A store shared with the Rust CLI: the call pauses in Node, a human answers with
// `countersign approve` from another process, and the identical retry in Node runs once.

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { execFileSync } = require('node:child_process')
const cs = require('..')
const { open } = require('./helpers.js')

const cli = process.env.COUNTERSIGN_BIN
if (!cli) {
  throw new Error('set COUNTERSIGN_BIN to the countersign CLI (run-tests.sh builds it: target/debug/countersign)')
}

test('pause in Node, approve with the CLI, the identical retry runs once', async () => {
  const { control, folder } = await open()
  const args = { payment_id: 'pi_cli', amount: 900 }
  let runs = 0
  const refund = (canonical) => {
    runs += 1
    return `refunded ${canonical.amount}`
  }
  let requestId
  await assert.rejects(control.execute('stripe.refund', args, refund), (error) => {
    assert.ok(error instanceof cs.ApprovalRequired)
    requestId = error.requestId
    return true
  })
  const policy = path.join(folder, 'countersign.yaml')
  const common = ['--policy', policy, '--store-url', control.storeUrl]
  const pending = JSON.parse(execFileSync(cli, ['pending', '--json', ...common], { encoding: 'utf8' }))
  assert.ok(JSON.stringify(pending).includes(requestId), 'the CLI sees the request Node paused on')
  execFileSync(cli, ['approve', requestId, '--as', 'human:alice', ...common], { encoding: 'utf8' })
  const done = await control.execute('stripe.refund', args, refund)
  assert.equal(done.value, 'refunded 900')
  assert.equal(done.receipt.approval_id, requestId)
  await assert.rejects(control.execute('stripe.refund', args, refund), cs.DuplicateEffect)
  assert.equal(runs, 1)
  const verified = execFileSync(cli, ['receipts', '--verify', ...common], { encoding: 'utf8' })
  assert.match(verified, /intact|ok|verified/i)
})
