'use strict'
// Durable: pause in one Node process, answer with `countersign approve` from another, resume from
// `RunState.fromString` in a third; the approved call runs exactly once, and a fourth process
// replaying the saved state runs nothing.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { execFileSync } = require('node:child_process')
const { scratch } = require('./helpers.js')

const cli = process.env.COUNTERSIGN_BIN
if (!cli) throw new Error('set COUNTERSIGN_BIN to the countersign CLI (run-tests.sh builds it)')

function step(name, folder) {
  const output = execFileSync(process.execPath, [path.join(__dirname, 'process-worker.js'), name, folder], {
    encoding: 'utf8',
    timeout: 120_000,
  })
  return JSON.parse(output.trim().split('\n').at(-1))
}

function runs(folder) {
  const log = path.join(folder, 'runs.log')
  return fs.existsSync(log) ? fs.readFileSync(log, 'utf8').trim().split('\n') : []
}

test('pause in one process, approve with the CLI, resume from RunState.fromString in a third: once', () => {
  const folder = scratch()
  const [requestId] = step('pause', folder)
  assert.match(requestId, /^apr_/)
  assert.deepEqual(runs(folder), [])

  const policy = path.join(folder, 'countersign.yaml')
  execFileSync(cli, ['--policy', policy, 'approve', requestId, '--as', 'human:carol'], { encoding: 'utf8' })

  const resumed = step('resume', folder)
  assert.equal(resumed.pending, 0)
  assert.match(resumed.final, /refunded pi_x/)
  const ran = runs(folder)
  assert.equal(ran.length, 1)
  assert.doesNotMatch(ran[0], new RegExp(`pid=${process.pid}$`), 'the tool ran in the resuming process')

  const replayed = step('resume', folder)
  assert.deepEqual(replayed, { refused: 'consumed' })
  assert.equal(runs(folder).length, 1)

  execFileSync(cli, ['--policy', policy, 'receipts', '--verify'], { encoding: 'utf8' })
})
