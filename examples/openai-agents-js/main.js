'use strict'
// A support agent whose refunds are countersigned: the OpenAI Agents SDK for JavaScript +
// Countersign.
//
//   node main.js                  # scripted model: offline, no API key
//   node main.js --wait           # you answer from another shell with `countersign approve`
//   OPENAI_API_KEY=sk-... node main.js   # a real model
//
// The run pauses on the large refund (policy says `approve`), a human answers (the script
// answers for "human:alice"; with --wait it waits up to 10 minutes for your `countersign approve
// <id>` or `countersign deny <id>` from another shell), and the resumed run refunds exactly what
// was approved, once. The receipt chain is verified at the end.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { Control } = require('@countersign/node')
const { Agent, Usage, setTracingDisabled } = require('@openai/agents')
const { Gate } = require('@countersign/openai-agents')

const WAIT = process.argv.slice(2).includes('--wait')

/** The offline model: the SDK's `Model` interface answering from a script. */
function scriptedModel() {
  return {
    async getResponse(request) {
      const items = typeof request.input === 'string' ? [] : request.input
      const done = Object.fromEntries(
        items.filter((item) => item.type === 'function_call_result').map((item) => [item.callId, item.output?.text ?? item.output]),
      )
      if (Object.keys(done).length === 0) {
        const calls = [
          ['lookup_order', { order_id: 'o-7' }, 'call_1'],
          ['refund_order', { order_id: 'o-7', amount: 25000 }, 'call_2'],
        ]
        return {
          usage: new Usage(),
          output: calls.map(([name, args, callId]) => ({
            type: 'function_call', id: `fc_${callId}`, callId, name, arguments: JSON.stringify(args), status: 'completed',
          })),
        }
      }
      const text = `Done. Tool results: ${JSON.stringify(done)}`
      return {
        usage: new Usage(),
        output: [{ type: 'message', id: 'msg_1', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text }] }],
      }
    },
    async *getStreamedResponse() {
      throw new Error('the scripted model does not stream')
    },
  }
}

/** Poll the kernel until someone answers `requestId` (or it expires), up to 10 minutes. */
async function waitForAnswer(control, requestId) {
  for (let second = 0; second < 600; second += 1) {
    const record = await control.approval(requestId)
    if (record !== null && record.state !== 'pending') {
      console.log(`  answered: ${record.state} by ${record.approver}`)
      return
    }
    await new Promise((resolve) => setTimeout(resolve, 1000))
  }
  console.log('  nobody answered in 10 minutes; the call stays pending')
}

async function main() {
  // The operator's part: the policy, the store (a fresh SQLite file here) and the principal.
  const workdir = fs.mkdtempSync(path.join(os.tmpdir(), 'countersign-example-'))
  const policy = path.join(workdir, 'countersign.yaml')
  fs.copyFileSync(path.join(__dirname, 'countersign.yaml'), policy)
  const control = await Control.open(policy, { principal: 'agent:support-bot' })
  const gate = new Gate(control)

  const lookupOrder = gate.tool({
    name: 'lookup_order',
    description: 'Look up an order.',
    parameters: { type: 'object', properties: { order_id: { type: 'string' } }, required: ['order_id'], additionalProperties: false },
    strict: true,
    execute: ({ order_id }) => JSON.stringify({ order_id, total: 25000, status: 'delivered' }),
  })
  const refundOrder = gate.tool({
    name: 'refund_order',
    description: 'Refund an order (amount in cents).',
    parameters: {
      type: 'object',
      properties: { order_id: { type: 'string' }, amount: { type: 'integer' } },
      required: ['order_id', 'amount'],
      additionalProperties: false,
    },
    strict: true,
    execute: ({ order_id, amount }) => {
      console.log(`  >>> refund_order ran: ${order_id} ${amount}`)
      return `refunded ${amount} cents on ${order_id}`
    },
  })

  let model
  if (process.env.OPENAI_API_KEY) {
    model = process.env.OPENAI_MODEL ?? 'gpt-4.1-mini'
    console.log(`using the real model ${model}`)
  } else {
    model = scriptedModel()
    setTracingDisabled(true) // nothing to export traces to without a key
    console.log('using the scripted model (set OPENAI_API_KEY to use a real one)')
  }
  const agent = new Agent({
    name: 'support',
    instructions: 'Refund order o-7 in full (25000 cents).',
    model,
    // Only the tools the policy can ever allow for this principal.
    tools: gate.guardTools([lookupOrder, refundOrder], 'agent:support-bot'),
  })

  let result = await gate.run(agent, 'Please refund order o-7 in full.')
  while (result.interruptions.length > 0) {
    const saved = gate.saveState(result) // keep it server-side
    const state = await gate.loadState(agent, saved) // RunState.fromString inside
    for (const call of await gate.pending(state)) {
      console.log(`paused: ${call.tool} ${JSON.stringify(call.request.arguments)} -> ${call.request.requestId}`)
      const command = `countersign --policy ${policy} approve ${call.request.requestId} --as human:<you>`
      if (WAIT) {
        console.log(`  waiting for your answer; from another shell run:\n    ${command}`)
        await waitForAnswer(control, call.request.requestId)
      } else {
        console.log(`  (with --wait you would answer it yourself: ${command})`)
        await gate.approve(state, call, { approver: 'human:alice', note: 'customer verified' })
      }
    }
    // Gate.run applies answers recorded elsewhere (the CLI) before resuming.
    result = await gate.run(agent, state)
  }

  console.log('final:', result.finalOutput)
  const report = await control.verifyReceipts()
  console.log(`receipts: ${report.checked} checked, chain intact: ${report.first_break === null}`)
  for (const receipt of await control.receipts()) {
    console.log(`  ${String(receipt.seq).padStart(2)} ${receipt.kind.padEnd(8)} ${receipt.outcome.padEnd(10)} ${(receipt.action ?? '').padEnd(14)} ${receipt.reason ?? ''}`)
  }
}

main().catch((error) => {
  console.error(error)
  process.exitCode = 1
})
