'use strict'
// A scripted model for offline tests: implements the SDK's `Model` interface (`getResponse`,
// `getStreamedResponse`) and answers from a script instead of calling an API (no network, no
// API key).
//
// The script is a list of turns; each turn is a list of calls `{ name, args, callId }`. The
// model finds its place from the conversation it is given, so a run resumed in another process
// (with a fresh model built from the same script) continues where the first one paused: it emits
// the first turn whose call ids are not all in the input yet, and once every scripted call has a
// result it answers with a final message listing the results it saw.

const { Usage } = require('@openai/agents')

class ScriptedModel {
  /** @param {{ name: string, args: object | string, callId: string }[][]} turns */
  constructor(turns) {
    this.turns = turns
    this.requests = 0
  }

  async getResponse(request) {
    this.requests += 1
    const items = typeof request.input === 'string' ? [] : request.input
    const present = new Set(items.filter((item) => item.type === 'function_call').map((item) => item.callId))
    for (const turn of this.turns) {
      if (!turn.every((call) => present.has(call.callId))) {
        return {
          usage: new Usage(),
          output: turn.map((call) => ({
            type: 'function_call',
            id: `fc_${call.callId}`,
            callId: call.callId,
            name: call.name,
            // A string is sent as written: raw JSON text (for example with a key twice).
            arguments: typeof call.args === 'string' ? call.args : JSON.stringify(call.args),
            status: 'completed',
          })),
        }
      }
    }
    const results = {}
    for (const item of items) {
      if (item.type === 'function_call_result') results[item.callId] = outputText(item.output)
    }
    return {
      usage: new Usage(),
      output: [
        {
          type: 'message',
          id: 'msg_final',
          role: 'assistant',
          status: 'completed',
          content: [{ type: 'output_text', text: `done: ${JSON.stringify(results)}` }],
        },
      ],
    }
  }

  // eslint-disable-next-line require-yield
  async *getStreamedResponse() {
    throw new Error('the scripted model does not stream')
  }
}

/** A tool result's text, whatever shape the SDK release stores it in. */
function outputText(output) {
  if (typeof output === 'string') return output
  if (output && typeof output === 'object' && typeof output.text === 'string') return output.text
  return JSON.stringify(output)
}

/** One scripted call. */
function call(name, args, callId) {
  return { name, args, callId }
}

module.exports = { ScriptedModel, call, outputText }
