'use strict'
// The adapter conformance kit, driven through this adapter and the real SDK (through the Node
// binding's test build). The report is compared with a checked-in snapshot; deliberately broken
// variants must each fail the suite they name, which shows the kit can fail this adapter.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { runKit } = require('./kit/adapter.js')

if (!process.env.COUNTERSIGN_BIN) {
  throw new Error('set COUNTERSIGN_BIN to the countersign CLI: the durability case answers with it')
}

const SNAPSHOT = path.join(__dirname, 'snapshots', 'conformance-report.txt')

test('the adapter passes every applicable case of the kit, reentry alone not applicable', async () => {
  const report = await runKit('openai-agents-js')
  if (process.env.COUNTERSIGN_UPDATE_SNAPSHOTS === '1') fs.writeFileSync(SNAPSHOT, report.text)
  assert.ok(report.ok, report.text)
  const { framework, shape, passed, applicable, not_applicable: notApplicable, suites } = report.data
  assert.equal(framework, 'openai-agents-js')
  assert.equal(shape, 'decided_before_invocation')
  const cases = suites.flatMap((suite) => suite.cases)
  assert.equal(passed, applicable)
  assert.equal(applicable + notApplicable, cases.length, 'every case of the kit is counted')
  assert.ok(notApplicable <= 1, report.text)
  const status = Object.fromEntries(suites.map((suite) => [suite.suite, suite.status]))
  assert.equal(status.binding, 'pass', 'binding applies: this adapter prevents')
  assert.equal(status.reentry, 'not_applicable', report.text)
  assert.equal(report.text, fs.readFileSync(SNAPSHOT, 'utf8'), 'the report changed; review it and rerun with COUNTERSIGN_UPDATE_SNAPSHOTS=1')
})

for (const [framework, suite] of [
  ['openai-agents-js-broken-sdk-flag', 'kernel'],
  ['openai-agents-js-broken-sdk-reject', 'denial'],
  ['openai-agents-js-broken-no-correlation', 'binding'],
  ['openai-agents-js-broken-run-state-approver', 'entitlement'],
  ['openai-agents-js-broken-one-run-id', 'entitlement'],
]) {
  test(`${framework} fails ${suite}`, async () => {
    const report = await runKit(framework)
    assert.equal(report.ok, false, report.text)
    const status = Object.fromEntries(report.data.suites.map((entry) => [entry.suite, entry.status]))
    assert.equal(status[suite], 'fail', report.text)
  })
}
