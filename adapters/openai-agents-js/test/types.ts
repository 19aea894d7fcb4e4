// Type-checked by run-tests.sh (tsc, never run): the declarations in index.d.ts used as a
// TypeScript host would use them, against the SDK's own types.

import { Control } from '@countersign/node'
import { Agent, RunState } from '@openai/agents'
import { DecisionNotFound, Gate, NotExecuted, notExecutedResult, unwrap, type PendingCall } from '..'

export async function host(control: Control): Promise<string | null> {
  const gate = new Gate(control)
  const refund = gate.tool({
    name: 'refund',
    description: 'Refund a payment.',
    parameters: { type: 'object', properties: { amount: { type: 'number' } }, required: ['amount'], additionalProperties: false },
    strict: true,
    timeout: 30,
    execute: async (args) => {
      if (typeof args.amount !== 'number') throw new NotExecuted('no amount', {})
      return `refunded ${args.amount}`
    },
  })
  const agent = new Agent({ name: 'support', instructions: 'help', tools: gate.guardTools([refund], 'agent:support-bot') })
  try {
    const result = await gate.run(agent, 'refund 900', { runId: 'run-1', maxTurns: 4 })
    const saved: string = gate.saveState(result)
    const state: RunState<any, typeof agent> = await gate.loadState(agent, saved)
    const calls: PendingCall[] = await gate.resolveInterruptions(state)
    for (const call of await gate.pending(state)) {
      const shown: unknown = call.request.arguments
      void shown
      await gate.approve(state, call, { approver: 'human:alice', always: false })
    }
    if (calls.length > 0) await gate.deny(state, calls[0]!, { approver: 'human:bob', note: 'no' })
    return gate.runId(state) ?? gate.refusal('c1')?.reason ?? notExecutedResult('pending', 'refund')
  } catch (error) {
    if (error instanceof DecisionNotFound) return error.callId
    return unwrap(error)?.reason ?? null
  }
}
