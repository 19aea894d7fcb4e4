'use strict'
// A resumed-in-place "framework" written in JavaScript on the Node binding, checked by the
// adapter conformance kit: the JavaScript twin of the kit's Rust reference adapter. Its pause:
// the interrupt suspends when it holds no answer for the pending request (the call ends
// ApprovalRequired); the adapter shows the request to the human, holds the answer keyed by the
// request id, and re-enters the same call, whose second pass finds the same pending request and
// takes the held answer through the kernel's InterruptApprovalProvider.
//
// Run it directly to print the report (`node test/kit/reference_adapter.js`); the kit also
// starts it that way for the durability case's second and third processes.

const { ApprovalRequired } = require('../..')
const conformance = require('../../conformance.js')

class HeldAnswers {
  // The resume value is what the human answered about, arguments included: prevention.
  carriesApprovedArguments = true
  paused = null
  held = new Map()

  interrupt(pending) {
    // A resume value answers only the request it names.
    const answer = this.held.get(pending.request_id)
    if (answer !== undefined) {
      this.held.delete(pending.request_id)
      return {
        decision: answer.decision,
        approver: answer.approver,
        approver_token: answer.approver_token,
        note: answer.note,
        arguments: answer.arguments,
        action_hash: answer.action_hash,
      }
    }
    this.paused = pending
    return null
  }
}

class ReferenceAdapter {
  framework = 'node-binding'
  shape = 'resumed_in_place'

  interrupt() {
    return new HeldAnswers()
  }

  async invoke(session, action, args, run) {
    // The framework's run id is the kit's run label: every request of the run is scoped to it.
    const call = () => session.control.execute(action, args, (canonical) => session.runTool(canonical), { run })
    try {
      return (await call()).value
    } catch (error) {
      if (!(error instanceof ApprovalRequired)) throw error
      const pending = session.interrupt.paused
      session.interrupt.paused = null
      if (pending === null || pending.request_id !== error.requestId) throw error
      const answer = session.review({
        request_id: pending.request_id,
        action: pending.action,
        arguments: pending.arguments,
        expires_at: pending.expires_at,
        action_hash: pending.action_hash,
      })
      // Nobody answered: stay paused (the request stays pending; the CLI may answer it).
      if (answer === null) throw error
      session.interrupt.held.set(answer.request_id, answer)
      return (await call()).value
    }
  }
}

// Deliberately broken variants: each must fail the suite it names, which shows the kit can fail
// an adapter written on this binding (docs/conformance.md).

/** Hands the kernel the approver name the resume payload carries. Must fail `entitlement`. */
class TakesTheApproverFromThePayload extends ReferenceAdapter {
  framework = 'node-binding-broken-payload-approver'

  interrupt() {
    const held = new HeldAnswers()
    const answer = held.interrupt.bind(held)
    held.interrupt = (pending) => {
      const given = answer(pending)
      return given === null ? null : { ...given, approver: held.payloadApprover, approver_token: null }
    }
    const hold = held.held.set.bind(held.held)
    held.held.set = (id, value) => {
      held.payloadApprover = value.payload_approver
      return hold(id, value)
    }
    return held
  }
}

/** Scopes no call to its run. Must fail `entitlement`: one run's approval authorizes another's. */
class ForgetsTheRun extends ReferenceAdapter {
  framework = 'node-binding-broken-no-run'

  async invoke(session, action, args) {
    return super.invoke(session, action, args, undefined)
  }
}

const VARIANTS = Object.fromEntries(
  [ReferenceAdapter, TakesTheApproverFromThePayload, ForgetsTheRun].map((Adapter) => [new Adapter().framework, Adapter]),
)

/** Run the kit against the adapter (or a broken variant) named `framework`. */
async function runKit(framework = 'node-binding') {
  const Adapter = VARIANTS[framework]
  if (Adapter === undefined) throw new Error(`no adapter variant \`${framework}\`: use ${Object.keys(VARIANTS).join(', ')}`)
  return conformance.run(new Adapter(), { relaunch: [process.execPath, __filename, framework] })
}

async function main() {
  const report = await runKit(process.argv[2])
  process.stdout.write(report.text)
  process.exitCode = report.ok ? 0 : 1
}

module.exports = { ReferenceAdapter, VARIANTS, runKit }

if (require.main === module) {
  main().catch((error) => {
    console.error(error)
    process.exitCode = 1
  })
}
