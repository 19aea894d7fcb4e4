'use strict'
// The shared number vectors (crates/countersign/tests/vectors/numbers.json) through the Node
// binding. Each input is read as a JavaScript program holds it: a number as a double, and an
// integer literal a double cannot hold exactly as a BigInt (how JavaScript carries such an
// integer; a Number could not, it would already be rounded). The action hash or the refusal must
// be the one the Rust kernel's test (tests/vectors.rs) and the Python binding's test agree on,
// except where a vector says `javascript_refused`: a Number has no integer/float distinction, so
// an integral Number outside ±(2^53−1) (the double of `1e20`) is an integer for the kernel's one
// rule, and refused (issue #19).

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
      const refused = vector.javascript_refused ?? vector.refused
      if (refused) {
        await assert.rejects(control.evaluate(file.action, args), (error) => {
          assert.ok(error instanceof cs.InvalidArguments, `${error.name}: ${error.message}`)
          assert.equal(error.canonicalReason, refused)
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

test('an integer beyond ±(2^53−1) is refused as a Number and as a BigInt; the boundaries pass', async () => {
  const control = await cs.Control.open(path.join(folder, 'numbers.policy.yaml'), {
    principal: file.principal,
    storeUrl: 'memory:',
  })
  // 9007199254740993 written in JavaScript source is the double 2^53 before any code sees it:
  // an integer past the safe range, refused (issue #19), never hashed as a rounded value.
  for (const n of [9007199254740993, -9007199254740993, 9007199254740992n, -9007199254740992n, 1e20]) {
    await assert.rejects(control.evaluate(file.action, { n }), (error) => {
      assert.ok(error instanceof cs.InvalidArguments, `${n}: ${error.name}`)
      assert.equal(error.canonicalReason, 'unsafe_integer')
      return true
    })
  }
  for (const n of [Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER, 9007199254740991n]) {
    const evaluation = await control.evaluate(file.action, { n })
    const vector = file.vectors.find((v) => v.input === String(n))
    assert.equal(evaluation.actionHash, vector.action_hash, String(n))
  }
})

test('an integer argument reaches the executor as an integer', async () => {
  const control = await cs.Control.open(path.join(folder, 'numbers.policy.yaml'), {
    principal: file.principal,
    storeUrl: 'memory:',
  })
  const seen = []
  for (const n of [Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER, 1.0, 9007199254740991n]) {
    await control.execute(file.action, { n }, async (args) => {
      seen.push(args.n)
      return null
    })
  }
  assert.deepEqual(seen, [Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER, 1, Number.MAX_SAFE_INTEGER])
  assert.ok(seen.every(Number.isSafeInteger))
})
