'use strict'
// The runnable example in examples/openai-agents-js, offline: the refund pauses, the script
// approves it, the resumed run refunds once, and the receipt chain is intact.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFileSync } = require('node:child_process')

test('the example pauses, is approved, refunds exactly once and verifies its receipts', () => {
  // The example requires the adapter by its package name: link it beside the SDK for this run.
  const modules = fs.mkdtempSync(path.join(os.tmpdir(), 'countersign-oaj-example-'))
  fs.mkdirSync(path.join(modules, '@countersign'))
  fs.symlinkSync(path.resolve(__dirname, '..'), path.join(modules, '@countersign', 'openai-agents'))
  const env = { ...process.env, OPENAI_API_KEY: '', NODE_PATH: [modules, process.env.NODE_PATH].filter(Boolean).join(path.delimiter) }
  const main = path.resolve(__dirname, '..', '..', '..', 'examples', 'openai-agents-js', 'main.js')
  const output = execFileSync(process.execPath, [main], { encoding: 'utf8', env, timeout: 120_000 })
  assert.match(output, /using the scripted model/)
  assert.match(output, /paused: refund_order \{"amount":25000,"order_id":"o-7"\} -> apr_/)
  assert.equal(output.match(/>>> refund_order ran: o-7 25000/g)?.length, 1, output)
  assert.match(output, /final: Done\. Tool results: .*refunded 25000 cents on o-7/)
  assert.match(output, /chain intact: true/)
})
