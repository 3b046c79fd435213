/**
 * The size rule: a source file of src/ holds at most FILE_LINES_MAX lines and a function at
 * most FUNCTION_LINES_MAX, so that files follow one concept and functions read at a glance.
 * Files and functions that were already larger when the rule came are listed in
 * scripts/size-baseline.json with their size then: they may shrink, not grow, and a new
 * one over the limit fails. `--update` rewrites the baseline (after a split, to drop what
 * now fits; never to let something grow without a reason in the commit).
 *
 * Generated code (src/protocol/generated) is exempt. Sizes count every line from the
 * first to the last of the node, comments inside included.
 */
import fs from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

// TypeScript 7 (the compiler of this project) has no JavaScript API; the alias package
// typescript-5 is installed for dependency-cruiser and serves here too.
const ts = createRequire(import.meta.url)('typescript-5')

const FILE_LINES_MAX = 800
const FUNCTION_LINES_MAX = 80

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const baselinePath = path.join(root, 'scripts', 'size-baseline.json')
const update = process.argv.includes('--update')

function sourceFiles(dir) {
  const out = []
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name)
    if (entry.isDirectory()) {
      if (full !== path.join(root, 'src', 'protocol', 'generated')) out.push(...sourceFiles(full))
    } else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) out.push(full)
  }
  return out
}

function lineOf(source, pos) {
  return source.getLineAndCharacterOfPosition(pos).line
}

/** A function's name as `Class.method` or `outer/inner`, with an ordinal for anonymous ones. */
function functionName(node, parents, anonymousCounts) {
  let own
  if (node.name && ts.isIdentifier(node.name)) own = node.name.text
  else if (node.name && (ts.isStringLiteral(node.name) || ts.isPrivateIdentifier(node.name)))
    own = node.name.text
  else if (ts.isConstructorDeclaration(node)) own = 'constructor'
  else if (node.parent && ts.isVariableDeclaration(node.parent) && ts.isIdentifier(node.parent.name))
    own = node.parent.name.text
  else if (node.parent && ts.isPropertyAssignment(node.parent) && ts.isIdentifier(node.parent.name))
    own = node.parent.name.text
  const prefix = parents.join('/')
  if (!own) {
    const n = (anonymousCounts.get(prefix) ?? 0) + 1
    anonymousCounts.set(prefix, n)
    own = `<anonymous ${n}>`
  }
  return prefix ? `${prefix}/${own}` : own
}

function isFunctionLike(node) {
  return (
    ts.isFunctionDeclaration(node) ||
    ts.isMethodDeclaration(node) ||
    ts.isConstructorDeclaration(node) ||
    ts.isGetAccessorDeclaration(node) ||
    ts.isSetAccessorDeclaration(node) ||
    ts.isArrowFunction(node) ||
    ts.isFunctionExpression(node)
  )
}

function measure(file) {
  const text = fs.readFileSync(file, 'utf8')
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
  const functions = []
  const anonymousCounts = new Map()
  const visit = (node, parents) => {
    let next = parents
    if (ts.isClassDeclaration(node) && node.name) next = [...parents, node.name.text]
    else if (isFunctionLike(node) && node.body) {
      const name = functionName(node, parents, anonymousCounts)
      const lines = lineOf(source, node.getEnd()) - lineOf(source, node.getStart(source)) + 1
      functions.push({ name, lines })
      next = name.split('/')
    }
    ts.forEachChild(node, (child) => visit(child, next))
  }
  visit(source, [])
  return { lines: text.split('\n').length - (text.endsWith('\n') ? 1 : 0), functions }
}

const current = {}
for (const file of sourceFiles(path.join(root, 'src')).sort()) {
  const rel = path.relative(root, file)
  const { lines, functions } = measure(file)
  if (lines > FILE_LINES_MAX) current[rel] = lines
  for (const f of functions) if (f.lines > FUNCTION_LINES_MAX) current[`${rel}:${f.name}`] = f.lines
}

if (update) {
  fs.writeFileSync(baselinePath, `${JSON.stringify(current, null, 2)}\n`)
  console.log(`size baseline: ${Object.keys(current).length} files and functions over the limits`)
  process.exit(0)
}

const baseline = fs.existsSync(baselinePath) ? JSON.parse(fs.readFileSync(baselinePath, 'utf8')) : {}
const problems = []
for (const [key, size] of Object.entries(current)) {
  const limit = key.includes(':') ? FUNCTION_LINES_MAX : FILE_LINES_MAX
  const allowed = baseline[key]
  if (allowed === undefined) problems.push(`${key}: ${size} lines, over the limit of ${limit}`)
  else if (size > allowed) problems.push(`${key}: grew to ${size} lines from ${allowed} (limit ${limit})`)
}
const fixed = Object.keys(baseline).filter((key) => current[key] === undefined)
if (problems.length > 0) {
  console.error(
    `Files over ${FILE_LINES_MAX} lines or functions over ${FUNCTION_LINES_MAX} (scripts/lint-size.mjs):`,
  )
  for (const p of problems) console.error(`  ${p}`)
  console.error('Split them; the baseline (scripts/size-baseline.json) only lets old ones shrink.')
  process.exit(1)
}
if (fixed.length > 0)
  console.log(
    `size: ${fixed.length} baseline entries now fit (or were renamed); run 'node scripts/lint-size.mjs --update'`,
  )
