'use strict'
// Shared fixtures of the adapter's tests: a fresh folder with a policy, a Control on a SQLite
// file inside it, a gate with a refund tool whose runs are counted, and readers of a run's tool
// results.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { Control } = require('@countersign/node')
const { Agent, setTracingDisabled } = require('@openai/agents')
const { Gate } = require('..')
const { ScriptedModel, outputText } = require('./scripted-model.js')

setTracingDisabled(true)

const POLICY = `schema: countersign.policy/v1
mode: enforce
environment: test
directory:
  human:alice: [finance]
  human:bob: [finance]
  human:mallory: []
actions:
  refund:
    effect: "refund:{payment_id}"
    rules:
      - when: { amount: { lte: 500 } }
        decision: allow
      - when: { amount: { lte: 100000 } }
        decision: approve
      - decision: deny
  transfer:
    decision: approve
    approval: { approvers: ["group:finance"], quorum: 2 }
  wipe_disk:
    decision: deny
`

const REFUND_PARAMETERS = {
  type: 'object',
  properties: { payment_id: { type: 'string' }, amount: { type: 'number' } },
  required: ['payment_id', 'amount'],
  additionalProperties: false,
}

/** A fresh folder holding `countersign.yaml`. */
function scratch(policy = POLICY) {
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'countersign-oaj-'))
  fs.writeFileSync(path.join(folder, 'countersign.yaml'), policy)
  return folder
}

/**
 * A gate on a fresh SQLite store, a `refund` tool whose body counts its runs (`runs`), and
 * `agent(turns)` building an agent on a scripted model.
 */
async function world({ policy, approvalTtl, principal = 'agent:test' } = {}) {
  const folder = scratch(policy)
  const control = await Control.open(path.join(folder, 'countersign.yaml'), { principal, approvalTtl })
  const gate = new Gate(control)
  const runs = []
  const refund = gate.tool({
    name: 'refund',
    description: 'Refund a payment.',
    parameters: REFUND_PARAMETERS,
    strict: true,
    execute: async (args) => {
      runs.push(args)
      return `refunded ${args.amount} on ${args.payment_id}`
    },
  })
  const agent = (turns, tools = [refund]) =>
    new Agent({ name: 'support', instructions: 'Use the tools.', model: new ScriptedModel(turns), tools })
  return { folder, control, gate, refund, runs, agent }
}

/** call id → the tool result text, from a run result's history. */
function results(result) {
  const found = {}
  for (const item of result.history) {
    if (item.type === 'function_call_result') found[item.callId] = outputText(item.output)
  }
  return found
}

/** The parsed model-facing result of call `callId`, or its raw text when it is not JSON. */
function resultOf(result, callId) {
  const text = results(result)[callId]
  if (text === undefined) throw new Error(`the run has no result for call \`${callId}\`: ${JSON.stringify(results(result))}`)
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/** Receipts as `kind/outcome/reason` strings, oldest first. */
async function receiptLine(control) {
  return (await control.receipts()).map((r) => `${r.kind}/${r.outcome}/${r.reason ?? ''}`)
}

module.exports = { POLICY, REFUND_PARAMETERS, scratch, world, results, resultOf, receiptLine }
