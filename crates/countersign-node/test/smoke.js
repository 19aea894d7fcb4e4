'use strict'
// Loads the binding on whatever Node runs this file (run-tests.sh runs it on the machine's
// Node 20) and runs one allowed call, one refusal and one chain verification through it.

const assert = require('node:assert/strict')
const { open } = require('./helpers.js')
const { DuplicateEffect } = require('..')

;(async () => {
  const { control } = await open()
  const done = await control.execute('stripe.refund', { payment_id: 'pi_smoke', amount: 5 },
    async (args) => `refunded ${args.amount}`)
  assert.equal(done.value, 'refunded 5')
  assert.equal(done.receipt.outcome, 'committed')
  await assert.rejects(
    control.execute('stripe.refund', { payment_id: 'pi_smoke', amount: 5 }, () => 'again'),
    (error) => error instanceof DuplicateEffect && error.reason === 'duplicate',
  )
  assert.equal((await control.verifyReceipts()).first_break, null)
  console.log(`ok: the binding loads and runs on Node ${process.version} (N-API ${process.versions.napi})`)
})().catch((error) => {
  console.error(error)
  process.exit(1)
})
