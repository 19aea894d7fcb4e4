'use strict'
// The shared number vectors (crates/countersign/tests/vectors/numbers.json) through the Node
// binding. Each input is read as a JavaScript program holds it: a number as a double, and an
// integer literal a double cannot hold exactly as a BigInt (how JavaScript carries such an
// integer; a Number could not, it would already be rounded). The action hash or the refusal must
// be the one the Rust kernel's test (tests/vectors.rs) and the Python binding's test agree on.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const cs = require('..')

const folder = path.join(__dirname, '..', '..', 'countersign', 'tests', 'vectors')
const file = JSON.parse(fs.readFileSync(path.join(folder, 'numbers.json'), 'utf8'))

/** A vector's input as a JavaScript value. */
function jsValue(input) {
  if (/^-?(0|[1-9][0-9]*)$/.test(input) && !Number.isSafeInteger(Number(input))) {
    return BigInt(input)
  }
  return JSON.parse(input)
}

test('the number vectors give the same hashes and refusals as Rust and Python', async (t) => {
  const control = await cs.Control.open(path.join(folder, 'numbers.policy.yaml'), {
    principal: file.principal,
    storeUrl: 'memory:',
  })
  assert.ok(file.vectors.length >= 20)
  for (const vector of file.vectors) {
    await t.test(vector.input, async () => {
      const args = { n: jsValue(vector.input) }
      if (vector.refused) {
        await assert.rejects(control.evaluate(file.action, args), (error) => {
          assert.ok(error instanceof cs.InvalidArguments, `${error.name}: ${error.message}`)
          assert.equal(error.canonicalReason, vector.refused)
          assert.equal(error.didRun, 'no')
          assert.equal(error.mayRetry, false)
          return true
        })
      } else {
        const evaluation = await control.evaluate(file.action, args)
        assert.equal(evaluation.actionHash, vector.action_hash)
      }
    })
  }
})

test('a Number beyond ±(2^53−1) is the double it already is; a BigInt keeps its digits', async () => {
  const control = await cs.Control.open(path.join(folder, 'numbers.policy.yaml'), {
    principal: file.principal,
    storeUrl: 'memory:',
  })
  // 9007199254740993 written in JavaScript source is the double 2^53 before any code sees it:
  // it hashes as 9007199254740992 (what the executor then receives), exactly as Rust's f64 would.
  const asNumber = await control.evaluate(file.action, { n: 9007199254740993 })
  const twoTo53 = file.vectors.find((vector) => vector.input === '9007199254740992')
  assert.equal(asNumber.actionHash, twoTo53.action_hash)
  await assert.rejects(control.evaluate(file.action, { n: 9007199254740993n }), cs.InvalidArguments)
  const asBigInt = await control.evaluate(file.action, { n: 9007199254740992n })
  assert.equal(asBigInt.actionHash, twoTo53.action_hash)
})
