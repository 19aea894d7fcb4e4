'use strict'
// Case B52 through the real `@openai/agents` SDK: the gate hands the kernel the model's raw
// `arguments` text, so a key written twice is refused by the kernel's strict reader, never
// resolved the way `JSON.parse` resolves it (the last one wins).

const test = require('node:test')
const assert = require('node:assert/strict')
const cs = require('@countersign/node')
const { world, resultOf, receiptLine } = require('./helpers.js')
const { call } = require('./scripted-model.js')

for (const raw of [
  '{"payment_id":"pi_9","amount":1,"amount":100}',
  '{"payment_id":"pi_9","\\u0070ayment_id":"pi_10","amount":1}',
  '{"payment_id":"pi_9","amount":1,"extra":{"k":1,"k":2}}',
]) {
  test(`a key written twice is refused and nothing runs: ${raw}`, async () => {
    const { gate, control, runs, agent } = await world()
    await assert.rejects(gate.run(agent([[call('refund', raw, 'c1')]]), 'refund pi_9'), (error) => {
      assert.ok(error instanceof cs.InvalidArguments, `${error?.name}: ${error?.message}`)
      assert.equal(error.canonicalReason, 'duplicate_key')
      assert.equal(error.didRun, 'no')
      return true
    })
    assert.deepEqual(runs, [])
    assert.deepEqual(await control.approvals(), [])
    assert.deepEqual(await receiptLine(control), [])
  })
}

test('the same call with each key once runs', async () => {
  const { gate, runs, agent } = await world()
  const result = await gate.run(agent([[call('refund', '{"payment_id":"pi_9","amount":100}', 'c1')]]), 'refund pi_9')
  assert.equal(resultOf(result, 'c1'), 'refunded 100 on pi_9')
  assert.deepEqual(runs, [{ payment_id: 'pi_9', amount: 100 }])
})

test('raw text with a lone surrogate is refused locally, never replaced (B51)', () => {
  assert.throws(() => new cs.RawArguments('{"a":"\ud800"}'), (error) => {
    assert.ok(error instanceof cs.InvalidArguments)
    assert.equal(error.canonicalReason, 'lone_surrogate')
    return true
  })
  assert.equal(new cs.RawArguments('{"a":"\ud83d\ude00"}').text, '{"a":"😀"}')
})
