'use strict'
// The adapter conformance kit, for adapters written in JavaScript: the Rust kit
// (`countersign-conformance`; docs/SPEC.md part 2, docs/conformance.md) with a JavaScript object
// playing the adapter, as `countersign.conformance` does for Python. Present only in a build
// with the `conformance` feature (the test build):
//
//   const conformance = require('@countersign/node/conformance')
//   const report = await conformance.run(new MyAdapter(), { relaunch: [process.execPath, __filename] })
//   console.log(report.text)
//
// An adapter is an object with:
// - `framework` (string) and `shape`: 'decided_before_invocation' or 'resumed_in_place';
// - `interrupt(setup)`: the framework's interrupt, an object with `carriesApprovedArguments`
//   (boolean) and `interrupt(pending)` returning (or resolving to) `null` to suspend or an
//   answer `{ decision: 'approve'|'reject', approver, approver_token?, note, arguments,
//   action_hash }` whose approver is the one the operator passed on the resuming call;
// - `invoke(session, action, args, run)`: drive one protected call of the kit's run `run`
//   through the framework; resolve to the executor's value, or reject with the kernel's
//   refusal as the binding threw it (it carries the kernel's error back to the kit), or with
//   `await session.paused(requestId)` when the framework paused;
// - optionally `resume(...)` (same signature) and `notApplicable(suite, case)`.
//
// `session` has `control` (the kit's kernel, a `Control`), `interrupt` (the object
// `adapter.interrupt` returned for this world), `scratchDir`, `review(shown)` (the scripted
// human: an answer or `null`), `runTool(args)` (the kit's executor) and `paused(requestId)`.
// `setup` has `review(shown)` and `scratchDir`. `relaunch` is the command line that runs this
// same adapter's kit again: the durability case pauses in one process, answers with
// `countersign approve` and resumes in another.

const { Control, _native: native } = require('./index.js')
const { fromNative } = require('./errors.js')

function review(handle, shown) {
  const text = handle.review(JSON.stringify(shown))
  return text === null ? null : JSON.parse(text)
}

function describe(error) {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error)
}

/**
 * Run the kit against `adapter`; `{ ok, text, data }` (`text`'s last line is
 * `<framework>: passed/applicable (k not applicable)`).
 */
async function run(adapter, { relaunch, cli, policy } = {}) {
  if (typeof native.runAdapterKit !== 'function') {
    throw new Error('this build of @countersign/node has no conformance kit: build it with `--features conformance`')
  }
  if (!Array.isArray(relaunch) || relaunch.length === 0) {
    throw new TypeError('run needs { relaunch: [process.execPath, __filename] }: the command that runs this kit again')
  }
  const interrupts = new Map()
  let next = 1
  const makeInterrupt = async (setup) => {
    try {
      const made = await adapter.interrupt({ review: (shown) => review(setup, shown), scratchDir: setup.scratchDir })
      const id = next++
      interrupts.set(id, made)
      return JSON.stringify({ ok: true, id, carries: Boolean(made.carriesApprovedArguments) })
    } catch (error) {
      return JSON.stringify({ ok: false, message: describe(error) })
    }
  }
  // napi-rs hands a tuple over as one array.
  const callInterrupt = async ([id, pendingJson]) => {
    const answer = await interrupts.get(id).interrupt(JSON.parse(pendingJson))
    return JSON.stringify(answer ?? null)
  }
  const invoke = async (handle) => {
    const session = {
      control: Control._adopt(handle.control()),
      interrupt: interrupts.get(handle.interruptId),
      scratchDir: handle.scratchDir,
      review: (shown) => review(handle, shown),
      runTool: async (args) => {
        try {
          return JSON.parse(await handle.runTool(JSON.stringify(args)))
        } catch (error) {
          throw fromNative(error)
        }
      },
      paused: async (requestId) => fromNative(new Error(await handle.paused(requestId))),
    }
    const method = handle.method === 'resume' && typeof adapter.resume === 'function' ? 'resume' : 'invoke'
    try {
      const value = await adapter[method](session, handle.action, JSON.parse(handle.argumentsJson), handle.run)
      return JSON.stringify({ ok: true, value: value ?? null })
    } catch (error) {
      return JSON.stringify({ ok: false, refusal: error?.kernelRefusal ?? null, message: describe(error) })
    }
  }
  const notApplicable = async ([suite, name]) => {
    if (typeof adapter.notApplicable !== 'function') return 'null'
    return JSON.stringify((await adapter.notApplicable(suite, name)) ?? null)
  }
  const report = await native.runAdapterKit(
    adapter.framework, adapter.shape, makeInterrupt, callInterrupt, invoke, notApplicable,
    relaunch, cli ?? null, policy ?? null,
  )
  return { ok: report.ok, text: report.text, data: JSON.parse(report.json) }
}

module.exports = { run }
