'use strict'
// The OpenAI Agents SDK for JavaScript adapter, checked by the Countersign adapter conformance
// kit (`@countersign/node/conformance`: the Rust kit through the binding's test build).
//
// The kit builds each case's world and hands this adapter the kernel (`session.control`) and the
// tool's body (`session.runTool`). Every call goes through the real SDK: a scripted model emits
// it, the SDK asks the gate's `needsApproval`, pauses with `result.interruptions`, and the
// scripted human (`session.review`) answers through `Gate.approve` / `Gate.deny`, exactly as a
// host application would; the run resumes with `Gate.run`.
//
// Run it directly to print the report (`node test/kit/adapter.js [variant]`); the kit also
// starts it that way for the durability case's second and third processes.

const fs = require('node:fs')
const path = require('node:path')
const { randomUUID } = require('node:crypto')
const { Agent, RunState, setTracingDisabled } = require('@openai/agents')
const { AnswerRefused, ApprovalExpired } = require('@countersign/node')
const conformance = require('@countersign/node/conformance')
const { Gate } = require('../..')
const { ScriptedModel, outputText } = require('../scripted-model.js')
const { forge } = require('../run-state.js')

setTracingDisabled(true)

// The SDK's tool names allow no dots: the kit's actions under the names the model sees.
const TOOL_NAMES = { 'kit.refund': 'kit_refund', 'kit.wire_transfer': 'kit_wire_transfer' }

/**
 * The SDK decides before invocation: the human's answer is recorded with the kernel's answer API
 * (`Gate.approve` / `Gate.deny`, the path `countersign approve` uses) before the SDK invokes the
 * tool, so the kernel finds the request answered and never needs this interrupt. If it is asked
 * (a request still pending at invocation), it suspends: a wait is never an answer.
 */
class KitInterrupt {
  // The run state the SDK resumes holds the arguments the tool is invoked with, and the kernel
  // re-checks their hash against the answered request: prevention.
  carriesApprovedArguments = true

  interrupt() {
    return null
  }
}

class OpenAIAgentsJsKitAdapter {
  framework = 'openai-agents-js'
  shape = 'decided_before_invocation'

  interrupt() {
    return new KitInterrupt()
  }

  async invoke(session, action, args, run) {
    if (fs.existsSync(this.pausedPath(session, run))) {
      // This run is paused (a quorum's first yes, a refused answer): the next invocation in it
      // continues that run, whose request is scoped to it.
      return this.resume(session, action, args, run)
    }
    const { gate, tools } = this.gate(session)
    const callId = `call_${randomUUID().replaceAll('-', '').slice(0, 12)}`
    const agent = this.agent(tools, action, args, callId)
    const result = await gate.run(agent, 'Do what the user asked.', { runId: this.runId(session, run) })
    return this.settle(session, gate, agent, result, callId, args, run)
  }

  async resume(session, action, args, run) {
    const saved = this.pausedPath(session, run)
    if (!fs.existsSync(saved)) return this.invoke(session, action, args, run)
    const paused = JSON.parse(fs.readFileSync(saved, 'utf8'))
    fs.unlinkSync(saved) // saved again if the resumed run pauses again
    const { gate, tools } = this.gate(session)
    const agent = this.agent(tools, action, args, paused.callId)
    // RunState.fromString inside; Gate.run applies the kernel's recorded answers (here:
    // `countersign approve` from another process) before resuming.
    const state = await gate.loadState(agent, paused.state)
    const result = await gate.run(agent, state)
    return this.settle(session, gate, agent, result, paused.callId, args, run)
  }

  // ------------------------------------------------------------------------------------------

  gate(session) {
    const gate = new Gate(session.control)
    const body = async (args) => JSON.stringify(await session.runTool(args))
    const tools = [
      gate.tool({
        name: 'kit_refund',
        action: 'kit.refund',
        description: 'Refund a payment.',
        parameters: {
          type: 'object',
          properties: { payment_id: { type: 'string' }, amount: { type: 'number' }, principal: { type: 'string' } },
          required: ['payment_id', 'amount'],
          additionalProperties: false,
        },
        strict: false,
        execute: body,
      }),
      gate.tool({
        name: 'kit_wire_transfer',
        action: 'kit.wire_transfer',
        description: 'Wire money.',
        parameters: {
          type: 'object',
          properties: { iban: { type: 'string' }, amount: { type: 'number' } },
          required: ['iban', 'amount'],
          additionalProperties: false,
        },
        strict: false,
        execute: body,
      }),
    ]
    return { gate, tools }
  }

  agent(tools, action, args, callId) {
    const model = new ScriptedModel([[{ name: TOOL_NAMES[action], args, callId }]])
    return new Agent({ name: 'kit', instructions: 'Use the tools.', model, tools })
  }

  pausedPath(session, run) {
    return path.join(session.scratchDir, `paused-${run}.json`)
  }

  /** The host's run id for the kit's run `run`: made once, kept in the scratch folder. */
  runId(session, run) {
    const file = path.join(session.scratchDir, 'runs.json')
    const runs = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : {}
    if (!(run in runs)) {
      runs[run] = `oaj-kit-${randomUUID()}`
      fs.writeFileSync(file, JSON.stringify(runs))
    }
    return runs[run]
  }

  /** Record the yes; whether the call may go on (false: it stays paused). */
  async approve(gate, state, call, answer) {
    try {
      // The approver is the one the operator passes on this call (the person signed in to the
      // host), never `payload_approver`, the name the run state carries.
      const record = await gate.approve(state, call, {
        approver: answer.approver ?? undefined,
        token: answer.approver_token ?? undefined,
        note: answer.note ?? undefined,
      })
      // A quorum's first yes leaves the request pending: the call waits for the next one.
      return record.state !== 'pending'
    } catch (error) {
      if (error instanceof ApprovalExpired) {
        // Answered too late: tell the model (the kernel records the refused attempt).
        await gate.resolveInterruptions(state)
        return true
      }
      // The request's rule refused this approver (a receipt says why): the call waits.
      if (error instanceof AnswerRefused) return false
      throw error
    }
  }

  async deny(gate, state, call, answer) {
    try {
      await gate.deny(state, call, {
        approver: answer.approver ?? undefined,
        token: answer.approver_token ?? undefined,
        note: answer.note ?? undefined,
      })
      return true
    } catch (error) {
      if (error instanceof AnswerRefused) return false
      throw error
    }
  }

  save(session, gate, call, state, run) {
    fs.writeFileSync(this.pausedPath(session, run), JSON.stringify({ callId: call.callId, state: gate.saveState(state) }))
  }

  /** Answer the run's pauses as the host would, until it ends; the call's value, or the refusal thrown. */
  async settle(session, gate, agent, result, callId, args, run) {
    for (let round = 0; round < 4; round += 1) {
      const pending = await gate.pending(result)
      if (pending.length === 0) break
      let state = result.state
      // The run state as saved at the pause, before any answer reached it.
      const atPause = state.toString()
      const runId = gate.runId(result)
      let edited = null
      for (const call of pending) {
        const request = call.request
        const answer = session.review({
          request_id: request.requestId,
          action: request.action,
          arguments: request.arguments,
          expires_at: request.expiresAt,
          action_hash: request.actionHash,
        })
        if (answer === null) {
          // Nobody answered: the run stays paused; save it for a later resume.
          this.save(session, gate, call, state, run)
          throw await session.paused(request.requestId)
        }
        const goesOn = answer.decision === 'approve'
          ? await this.approve(gate, state, call, answer)
          : await this.deny(gate, state, call, answer)
        if (!goesOn) {
          // One answer per pause: the call still waits (a refused answer, or a quorum's first
          // yes); save the run for a later resume.
          this.save(session, gate, call, state, run)
          throw await session.paused(request.requestId)
        }
        if (JSON.stringify(answer.arguments) !== JSON.stringify(request.arguments)) edited = answer.arguments
      }
      if (edited !== null) {
        // The answer is about other arguments: the run state saved at the pause was edited
        // before the run resumed (what a client holding the saved state can do); the resume
        // applies the kernel's answer to it. (Editing a state the SDK already approved is
        // refused by newer SDK releases themselves, before the kernel sees it.)
        state = await RunState.fromString(agent, forge(atPause, args, edited))
      }
      // The host resumes its own run (it knows the run id; the string is what was edited).
      result = await gate.run(agent, state, { runId })
    }
    const refusal = gate.refusal(callId)
    // The model read "the tool did not run"; the host gets the kernel's refusal.
    if (refusal !== null) throw refusal
    const item = result.history.find((entry) => entry.type === 'function_call_result' && entry.callId === callId)
    if (item === undefined) throw new Error(`the run ended without a result for call \`${callId}\``)
    return JSON.parse(outputText(item.output))
  }
}

// Deliberately broken variants: each must fail the suite it names, which shows the kit can fail
// this adapter's shape (docs/conformance.md).

/** Approves in the SDK's run state only; no answer reaches the kernel. Must fail `kernel`. */
class TrustsTheSdkFlag extends OpenAIAgentsJsKitAdapter {
  framework = 'openai-agents-js-broken-sdk-flag'

  async approve(gate, state, call) {
    state.approve(call.item)
    return true
  }
}

/** Rejects in the SDK's run state only: no recorded denial. Must fail `denial`. */
class RejectsInTheSdkOnly extends OpenAIAgentsJsKitAdapter {
  framework = 'openai-agents-js-broken-sdk-reject'

  async deny(gate, state, call) {
    state.reject(call.item)
    return true
  }
}

/**
 * Presents no approval request and no call correlation when the tool runs (the kernel then looks
 * for a grant for whatever arguments arrive). Must fail `binding`.
 */
class ForgetsTheCorrelation extends OpenAIAgentsJsKitAdapter {
  framework = 'openai-agents-js-broken-no-correlation'

  gate(session) {
    const control = session.control
    const forgetful = new Proxy(control, {
      get(target, name) {
        if (name === 'execute') {
          return (action, args, executor, options = {}) => {
            const { approval, correlation, ...rest } = options
            return target.execute(action, args, executor, rest)
          }
        }
        const value = target[name]
        return typeof value === 'function' ? value.bind(target) : value
      },
    })
    return super.gate({ ...session, control: forgetful })
  }
}

/** Records the approver named in the run state (`payload_approver`). Must fail `entitlement`. */
class TakesTheApproverFromTheRunState extends OpenAIAgentsJsKitAdapter {
  framework = 'openai-agents-js-broken-run-state-approver'

  async approve(gate, state, call, answer) {
    return super.approve(gate, state, call, { ...answer, approver: answer.payload_approver, approver_token: null })
  }
}

/** Passes one run id for every run of the host. Must fail `entitlement`. */
class SharesOneRunIdAcrossRuns extends OpenAIAgentsJsKitAdapter {
  framework = 'openai-agents-js-broken-one-run-id'

  runId() {
    return 'oaj-kit-the-only-run'
  }
}

const VARIANTS = Object.fromEntries(
  [
    OpenAIAgentsJsKitAdapter,
    TrustsTheSdkFlag,
    RejectsInTheSdkOnly,
    ForgetsTheCorrelation,
    TakesTheApproverFromTheRunState,
    SharesOneRunIdAcrossRuns,
  ].map((Adapter) => [new Adapter().framework, Adapter]),
)

/** Run the kit against the adapter (or a broken variant) named `framework`. */
async function runKit(framework = 'openai-agents-js') {
  const Adapter = VARIANTS[framework]
  if (Adapter === undefined) throw new Error(`no adapter variant \`${framework}\`: use ${Object.keys(VARIANTS).join(', ')}`)
  return conformance.run(new Adapter(), { relaunch: [process.execPath, __filename, framework] })
}

module.exports = { VARIANTS, runKit }

if (require.main === module) {
  runKit(process.argv[2])
    .then((report) => {
      process.stdout.write(report.text)
      process.exitCode = report.ok ? 0 : 1
    })
    .catch((error) => {
      console.error(error)
      process.exitCode = 1
    })
}
