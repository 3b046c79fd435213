/**
 * Runs dependency-cruiser (the layering and no-cycle check, .dependency-cruiser.cjs) on src/.
 * dependency-cruiser parses TypeScript with the TypeScript 5 compiler API, which TypeScript 7
 * (the native compiler that builds this project) no longer ships: the `typescript-5` alias
 * package is handed to it in place of `typescript`, for both its require() and its import().
 */
import Module, { register } from 'node:module'

const alias = (specifier) =>
  specifier === 'typescript' || specifier.startsWith('typescript/')
    ? specifier.replace(/^typescript/, 'typescript-5')
    : specifier

register(
  `data:text/javascript,${encodeURIComponent(`
    export async function resolve(specifier, context, next) {
      const s = specifier === 'typescript' || specifier.startsWith('typescript/') ? specifier.replace(/^typescript/, 'typescript-5') : specifier
      return next(s, context)
    }`)}`,
)
const resolveFilename = Module._resolveFilename
Module._resolveFilename = function (request, ...rest) {
  return resolveFilename.call(this, alias(request), ...rest)
}
process.argv = [
  process.argv[0],
  'depcruise',
  '--config',
  '.dependency-cruiser.cjs',
  'src',
  ...process.argv.slice(2),
]
const bin = new URL('../node_modules/dependency-cruiser/bin/dependency-cruise.mjs', import.meta.url)
await import(bin.href)
