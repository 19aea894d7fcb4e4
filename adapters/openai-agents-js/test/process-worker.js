'use strict'
// One step of the cross-process test, run as its own Node process:
//
//   node process-worker.js pause  FOLDER   # run until the pause; save the run state
//   node process-worker.js resume FOLDER   # restore it (RunState.fromString) and resume
//
// The tool appends a line to FOLDER/runs.log each time it really runs. The last line printed is
// the step's outcome as JSON.

const fs = require('node:fs')
const path = require('node:path')
const { Control, CountersignError } = require('@countersign/node')
const { Agent, setTracingDisabled } = require('@openai/agents')
const { Gate } = require('..')
const { ScriptedModel, call } = require('./scripted-model.js')
const { REFUND_PARAMETERS } = require('./helpers.js')

setTracingDisabled(true)

async function build(folder) {
  const control = await Control.open(path.join(folder, 'countersign.yaml'), { principal: 'agent:test' })
  const gate = new Gate(control)
  const refund = gate.tool({
    name: 'refund',
    description: 'Refund a payment.',
    parameters: REFUND_PARAMETERS,
    strict: true,
    execute: (args) => {
      fs.appendFileSync(path.join(folder, 'runs.log'), `refund ${args.payment_id} pid=${process.pid}\n`)
      return `refunded ${args.payment_id}`
    },
  })
  const model = new ScriptedModel([[call('refund', { payment_id: 'pi_x', amount: 900 }, 'c1')]])
  return { gate, agent: new Agent({ name: 'assistant', instructions: 'Use the tools.', model, tools: [refund] }) }
}

async function main(step, folder) {
  const { gate, agent } = await build(folder)
  const saved = path.join(folder, 'state.json')
  if (step === 'pause') {
    const result = await gate.run(agent, 'refund pi_x')
    fs.writeFileSync(saved, gate.saveState(result))
    console.log(JSON.stringify((await gate.pending(result)).map((c) => c.request.requestId)))
  } else if (step === 'resume') {
    const state = await gate.loadState(agent, fs.readFileSync(saved, 'utf8'))
    try {
      const result = await gate.run(agent, state)
      console.log(JSON.stringify({ final: result.finalOutput, pending: result.interruptions.length }))
    } catch (error) {
      if (!(error instanceof CountersignError)) throw error
      console.log(JSON.stringify({ refused: error.reason }))
    }
  } else {
    throw new Error(`unknown step \`${step}\`: use pause or resume`)
  }
}

main(process.argv[2], process.argv[3]).catch((error) => {
  console.error(error)
  process.exitCode = 1
})
