'use strict'
// The adapter conformance kit through the Node binding (feature `conformance`): a JavaScript
// adapter on the binding passes every suite, and deliberately broken ones fail the suite they
// break, so the kit can fail a JavaScript adapter.

const test = require('node:test')
const assert = require('node:assert/strict')
const { runKit } = require('./kit/reference_adapter.js')

if (!process.env.COUNTERSIGN_BIN) {
  throw new Error('set COUNTERSIGN_BIN to the countersign CLI: the durability case answers with it')
}

test('the JavaScript reference adapter passes every suite', async () => {
  const report = await runKit('node-binding')
  assert.ok(report.ok, report.text)
  assert.match(report.text, /node-binding: 18\/18 \(0 not applicable\)\n$/)
})

for (const [framework, suite] of [
  ['node-binding-broken-payload-approver', 'entitlement'],
  ['node-binding-broken-no-run', 'entitlement'],
]) {
  test(`${framework} fails ${suite}`, async () => {
    const report = await runKit(framework)
    assert.equal(report.ok, false, report.text)
    assert.match(report.text, new RegExp(`^${suite} \\(FAIL\\)$`, 'm'), report.text)
  })
}
