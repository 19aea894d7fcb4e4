'use strict'
// The shared text vectors (crates/countersign/tests/vectors/text.json, cases B50, B51, B52)
// through the Node binding: each input is handed to the kernel as the raw text it is
// (`RawArguments`), so a key written twice, a lone surrogate escape and nesting past 64 levels
// are the kernel's refusals, as in the Rust (tests/vectors.rs) and Python tests.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const cs = require('..')

const folder = path.join(__dirname, '..', '..', 'countersign', 'tests', 'vectors')
const file = JSON.parse(fs.readFileSync(path.join(folder, 'text.json'), 'utf8'))

test('the text vectors give the same refusals and hashes as Rust and Python', async (t) => {
  const control = await cs.Control.open(path.join(folder, 'numbers.policy.yaml'), {
    principal: file.principal,
    storeUrl: 'memory:',
  })
  assert.ok(file.vectors.length >= 13)
  const hashes = new Map()
  for (const vector of file.vectors) {
    await t.test(vector.note, async () => {
      if (vector.input_hex !== undefined) {
        // Bytes that are not UTF-8: a strict decoder refuses them (a lenient one would put
        // U+FFFD in their place, which is what must never reach the kernel).
        assert.throws(() => new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(vector.input_hex, 'hex')), TypeError)
        return
      }
      const raw = new cs.RawArguments(vector.input)
      if (vector.refused) {
        await assert.rejects(control.evaluate(file.action, raw), (error) => {
          assert.ok(error instanceof cs.InvalidArguments, `${error.name}: ${error.message}`)
          assert.equal(error.canonicalReason, vector.refused)
          assert.equal(error.didRun, 'no')
          return true
        })
      } else {
        const evaluation = await control.evaluate(file.action, raw)
        const earlier = hashes.get(vector.canonical)
        if (earlier !== undefined) assert.equal(evaluation.actionHash, earlier, 'same canonical, same hash')
        hashes.set(vector.canonical, evaluation.actionHash)
      }
    })
  }
  assert.equal(hashes.size, 2, 'the emoji (escaped and literal) and the 64-level value')
})

test('a duplicate that JSON.parse hides is refused only as raw text', async () => {
  const control = await cs.Control.open(path.join(folder, 'numbers.policy.yaml'), {
    principal: file.principal,
    storeUrl: 'memory:',
  })
  const text = '{"to":"a@x","amount":1,"amount":1000}'
  assert.deepEqual(JSON.parse(text), { to: 'a@x', amount: 1000 })
  await control.evaluate(file.action, JSON.parse(text))
  await assert.rejects(control.evaluate(file.action, new cs.RawArguments(text)), (error) => error.canonicalReason === 'duplicate_key')
  await assert.rejects(control.evaluate(file.action, new cs.RawArguments(`{"s":"${'a'.repeat(4 * 1024 * 1024)}"}`)), (error) => error.canonicalReason === 'too_large')
})

test('RawArguments refuses a lone surrogate locally and anything but a string', () => {
  for (const text of ['{"s":"\ud800"}', '{"s":"\udc00"}', '{"s":"\ude00\ud83d"}']) {
    assert.throws(() => new cs.RawArguments(text), (error) => error instanceof cs.InvalidArguments && error.canonicalReason === 'lone_surrogate')
  }
  assert.throws(() => new cs.RawArguments(Buffer.from('{}')), TypeError)
})
