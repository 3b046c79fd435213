'use strict'
// Stands in for node:assert in the bundled packages (sonic-boom checks one condition with
// it): loading node:assert costs about 2.5 ms of `tidelog start` (it sets up stderr for its
// colored diffs), so it is loaded only when an assertion fails, and then throws as it would.
module.exports = function assert(value, message) {
  if (!value) require('node:assert')(value, message)
}
