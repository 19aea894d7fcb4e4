'use strict'
// `Control.canPermit`: the kernel's "can this entry ever let a call run", which the
// `@countersign/openai-agents` adapter's `guardTools` hides tools by.

const test = require('node:test')
const assert = require('node:assert/strict')
const { open } = require('./helpers.js')

const POLICY = `schema: countersign.policy/v1
mode: MODE
environment: test
actions:
  stripe.refund:
    rules:
      - when: { amount: { lte: 500 } }
        decision: allow
      - decision: deny
  db.drop:
    rules:
      - when: { table: { eq: scratch } }
        decision: deny
      - decision: deny
  wipe.disk:
    decision: deny
  "files.read_*":
    decision: approve
`

test('an action is permitted when some rule of its entry allows or approves', async () => {
  const { control } = await open({ policy: POLICY.replace('MODE', 'enforce') })
  assert.equal(control.canPermit('stripe.refund'), true)
  assert.equal(control.canPermit('files.read_config'), true, 'a pattern entry that approves')
  assert.equal(control.canPermit('db.drop'), false, 'every rule denies')
  assert.equal(control.canPermit('wipe.disk'), false, 'decision: deny')
  assert.equal(control.canPermit('mail.send'), false, 'an unlisted action is denied')
  assert.throws(() => control.canPermit(7), TypeError)
})

test('in observe mode every action may run, so none is reported as never permitted', async () => {
  const { control } = await open({ policy: POLICY.replace('MODE', 'observe') })
  assert.equal(control.canPermit('wipe.disk'), true)
  assert.equal(control.canPermit('mail.send'), true)
})
