'use strict'
// Shared fixtures of the Node binding's tests: a fresh folder with a policy, and a Control on a
// SQLite file inside it.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { Control } = require('..')

const POLICY = `schema: countersign.policy/v1
mode: enforce
environment: test
directory:
  human:alice: [finance]
  human:bob: [finance]
  agent:test: [support]
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - when: { amount: { lte: 500 } }
        decision: allow
      - when: { amount: { lte: 100000 } }
        decision: approve
      - decision: deny
  finance.transfer:
    effect: "transfer:{transfer_id}"
    decision: approve
    approval: { approvers: ["group:finance"], quorum: 2 }
  vault.open:
    decision: approve
    approval: { approvers: ["human:*"], require: authenticated }
  mail.send:
    effect: "mail:{message_id}"
    decision: allow
`

/** A fresh folder holding `countersign.yaml` (the policy above, or `policy`). */
function scratch(policy = POLICY) {
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'countersign-node-'))
  fs.writeFileSync(path.join(folder, 'countersign.yaml'), policy)
  return folder
}

/** A Control on a fresh SQLite store beside a fresh policy. */
async function open(options = {}) {
  const folder = scratch(options.policy)
  const control = await Control.open(path.join(folder, 'countersign.yaml'), {
    principal: 'agent:test',
    ...options,
  })
  return { control, folder }
}

module.exports = { POLICY, scratch, open }
