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

test('the kit run as a program prints its report and exits (nothing keeps Node alive)', () => {
  const { execFileSync } = require('node:child_process')
  const path = require('node:path')
  // A bridge left holding the event loop would hang here until the timeout kills the child.
  const output = execFileSync(process.execPath, [path.join(__dirname, 'kit', 'reference_adapter.js')], {
    encoding: 'utf8',
    timeout: 120_000,
  })
  assert.match(output, /node-binding: 18\/18 \(0 not applicable\)\n$/)
})
