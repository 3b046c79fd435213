// Used as `node --import bench/module-counter.mjs ...` by bench/startup.bench.ts --modules
// and test/cli/bundle.test.ts: appends the URL of every module the process loads (ES modules
// through a load hook, CommonJS ones through Module._load) to the file named by
// TIDELOG_MODULE_LOG, and of every file compiled as a vm.Script (the CLI's bundle,
// bin/load-bundle.js), followed by what became of its code cache: ` code-cache=accepted`,
// `rejected` or `none`.
import { appendFileSync } from 'node:fs'
import Module, { register } from 'node:module'
import { pathToFileURL } from 'node:url'
import vm from 'node:vm'

const log = process.env.TIDELOG_MODULE_LOG
if (log) {
  const hooks = `
    import { appendFileSync } from 'node:fs'
    export async function load(url, context, next) {
      if (context.format !== 'commonjs') appendFileSync(${JSON.stringify(log)}, url + '\\n')
      return next(url, context)
    }`
  register(`data:text/javascript,${encodeURIComponent(hooks)}`)
  const seen = new Set()
  const load = Module._load
  Module._load = function (request, parent, isMain, ...rest) {
    let url = request
    try {
      const filename = Module._resolveFilename(request, parent, isMain)
      url = filename.startsWith('/') ? pathToFileURL(filename).href : `node:${filename.replace(/^node:/, '')}`
    } catch {
      // unresolvable: let the real loader throw
    }
    if (!seen.has(url)) {
      seen.add(url)
      appendFileSync(log, `${url}\n`)
    }
    return load.call(this, request, parent, isMain, ...rest)
  }
  const Script = vm.Script
  vm.Script = class LoggedScript extends Script {
    constructor(code, options) {
      super(code, options)
      if (options?.filename) {
        const cache =
          options.cachedData === undefined ? 'none' : this.cachedDataRejected ? 'rejected' : 'accepted'
        appendFileSync(log, `${pathToFileURL(options.filename).href} code-cache=${cache}\n`)
      }
    }
  }
}
