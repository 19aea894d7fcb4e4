'use strict'
// Edits of saved run states, as a client holding the string could make them.

/**
 * A client's edit of a serialized `RunState`: the call's arguments `from` replaced by `to`
 * everywhere they appear, as the arguments text the model sent (escaped inside the state's
 * JSON) and as a JSON object.
 * @param {string} serialized `state.toString()`
 * @param {object} from
 * @param {object} to
 */
function forge(serialized, from, to) {
  const escaped = (value) => JSON.stringify(JSON.stringify(value)).slice(1, -1)
  const edited = serialized
    .split(escaped(from)).join(escaped(to))
    .split(JSON.stringify(from)).join(JSON.stringify(to))
  if (edited === serialized) throw new Error(`the run state does not hold the arguments ${JSON.stringify(from)}`)
  return edited
}

module.exports = { forge }
