// Type-checked (not run) by run-tests.sh with `tsc -p .`: the declarations describe the API as
// the tests use it.
import { Control, ApprovalRequired, CountersignError, NotExecuted } from '..'

async function example(): Promise<string> {
  const control = await Control.open('countersign.yaml', { principal: 'agent:support-bot' })
  try {
    const done = await control.execute('stripe.refund', { payment_id: 'pi_1', amount: 75_000, id: 2n ** 60n },
      async (args) => `refunded ${String(args.amount)}`, { run: 'r1', correlation: { framework: 'toy', callId: 'c1' } })
    const text: string = done.value
    const seq: number = done.receipt.seq
    return `${text} #${seq}`
  } catch (error) {
    if (error instanceof ApprovalRequired) return `waiting on ${error.requestId}`
    if (error instanceof CountersignError && error.mayRetry) return error.reason
    throw error
  }
}

function executor(): never {
  throw new NotExecuted('refused before sending', { mayRetry: true })
}

void example
void executor
