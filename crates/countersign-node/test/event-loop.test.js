'use strict'
// Node's event loop is never blocked: the kernel works on napi-rs's worker threads. While 200
// `execute` calls run at once against a SQLite store, a 10 ms `setInterval` keeps firing with no
// gap over 50 ms between two ticks.

const test = require('node:test')
const assert = require('node:assert/strict')
const { open } = require('./helpers.js')

test('200 concurrent executes on SQLite leave the event loop free', async () => {
  const { control } = await open()
  // Warm up: the first calls open the file, prepare statements and let V8 compile the
  // binding's JavaScript, none of which is what this test is about.
  await Promise.all(Array.from({ length: 200 }, (_, index) =>
    control.execute('mail.send', { message_id: `warm-up-${index}` }, () => 'sent')))
  const ticks = []
  const timer = setInterval(() => ticks.push(performance.now()), 10)
  const started = performance.now()
  let runs = 0
  const calls = Array.from({ length: 200 }, (_, index) =>
    control.execute('mail.send', { message_id: `m${index}` }, async (args) => {
      runs += 1
      await new Promise((resolve) => setImmediate(resolve))
      return args.message_id
    }))
  const done = await Promise.all(calls)
  const elapsed = performance.now() - started
  clearInterval(timer)
  assert.equal(runs, 200)
  assert.deepEqual(done.map((call) => call.value), Array.from({ length: 200 }, (_, i) => `m${i}`))
  assert.ok(ticks.length >= 3, `the interval must have fired during the run (${ticks.length} ticks in ${elapsed.toFixed(0)} ms)`)
  const gaps = ticks.slice(1).map((tick, index) => tick - ticks[index])
  const worst = Math.max(...gaps, ticks[0] - started)
  console.log(`200 executes in ${elapsed.toFixed(0)} ms, ${ticks.length} ticks, largest gap ${worst.toFixed(1)} ms`)
  assert.ok(worst <= 50, `the event loop stalled for ${worst.toFixed(1)} ms`)
  const receipts = await control.receipts()
  assert.equal(receipts.filter((receipt) => receipt.outcome === 'committed').length, 400)
  assert.equal((await control.verifyReceipts()).first_break, null)
})
