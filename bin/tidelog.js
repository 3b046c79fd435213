#!/bin/sh
':' //; if [ "$TIDELOG_MALLOC_DEFAULTS" != 0 ]; then export MALLOC_MMAP_THRESHOLD_="${MALLOC_MMAP_THRESHOLD_-131072}"; [ -n "$LD_PRELOAD" ] || for j in /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 /usr/lib/aarch64-linux-gnu/libjemalloc.so.2 /usr/lib64/libjemalloc.so.2 /usr/lib/libjemalloc.so.2; do [ -r "$j" ] && export LD_PRELOAD="$j" MALLOC_CONF="${MALLOC_CONF-background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0}" && break; done; case "$NODE_OPTIONS" in *--max-semi-space-size*) ;; *) export NODE_OPTIONS="--max-semi-space-size=2 $NODE_OPTIONS";; esac; fi; exec node "$0" "$@"
'use strict'
// The two lines above are a shell script that runs this file with node, which reads the second
// as a string and a comment. They fix glibc's mmap threshold at its initial 128 KiB before node
// starts (glibc reads it only then): each allocation that large (the Buffer of a produce
// request, a fetch's read buffer) then gets pages of its own, given back to the kernel when it
// is freed. By default glibc raises the threshold after each such block freed, up to 32 MiB, so
// those Buffers came from its heap, which keeps freed pages resident. Measured on 3 etcd
// brokers (docs/notes/performance.md, "glibc's mmap threshold"): RSS 4 MiB lower idle and
// about 15 MiB lower after load, for 2-3x the page faults and some 5-15 % more CPU per MB.
// When jemalloc is installed (Debian's libjemalloc2) and nothing is preloaded yet, node runs on
// it instead, with freed pages handed back to the kernel after about a second (background
// purging, dirty_decay_ms 1000, muzzy_decay_ms 0): glibc keeps its main heap's freed pages
// resident until malloc_trim, which JavaScript cannot call, so after a throughput run a broker
// stayed ~55 MiB above idle; on jemalloc it comes back to within ~10 MiB of it (notes,
// "jemalloc"). 250 ms took ~20 MiB more off the figure right after a throughput run but looked
// to cost throughput and CPU per MB (notes, "What a broker holds when a throughput run ends").
// An operator's LD_PRELOAD or MALLOC_CONF is kept.
// V8's young generation is capped at two semi-spaces of 2 MiB (`--max-semi-space-size=2`,
// through NODE_OPTIONS) instead of 16: under load V8 grows them to their maximum and keeps them,
// and a broker's short-lived objects (requests, answers, closures) do not need more. Measured
// on 3 etcd brokers (notes, "The young generation"): at 4 MiB, RSS about 8 MiB lower idle and
// 25-40 MiB lower after the throughput run, with the same CPU per MB and per record; 2 MiB took
// another 3-4 MiB off idle (notes, "What a broker holds when a throughput run ends"). The build
// makes the bundle's code cache under these flags (scripts/bundle-code-cache.mjs), since V8
// refuses a cache made under other ones.
// A value already in the environment is kept (a --max-semi-space-size in NODE_OPTIONS, too);
// TIDELOG_MALLOC_DEFAULTS=0 leaves glibc and V8 their own defaults and preloads nothing.
// Other libcs (musl, macOS) ignore it. Not `#!/usr/bin/env -S NAME=VALUE node`: BusyBox's env
// (Alpine) has no -S. Not a parent process that starts node: the pid a supervisor or a fault
// test signals must be the broker's, and `exec` keeps it (Node 20 has no execve of its own).
// `node bin/tidelog.js` and brokers in another program's process (tidelog/testing) run without it.
//
// Entry point of the `tidelog` command; the CLI itself is compiled TypeScript in dist/.
//
// `npm run build` writes both tsc's modules (dist/src) and a bundle of them (dist/bundle,
// scripts/bundle.mjs) that starts in about half the time: one script compiled from V8's code
// cache instead of ~190 modules to resolve, link and compile (load-bundle.js,
// docs/notes/startup.md). This file is CommonJS (bin/package.json) for the same reason: running
// an ES module entry would start Node's ESM loader, which the bundle does not need.
//
// The bundle is used unless it is missing or older than tsc's output (a bare `tsc` since the
// last build rewrote every file): running stale code would be worse than starting slower, so
// then the modules are loaded instead, as they are when TIDELOG_BUNDLE=0 asks for them
// (profiling, debugging one module, or a `tsc --watch`, which re-emits only the files that
// changed). Only one file is compared: checking all ~240 inputs would cost 2-4 ms of the
// start-up the bundle saves. Equal times count as fresh: npm gives every file of an
// installed package the same timestamp.
const { existsSync, statSync } = require('node:fs')
const { join } = require('node:path')

const root = join(__dirname, '..')
const modules = join(root, 'dist', 'src', 'cli', 'main.js')
const bundleDir = join(root, 'dist', 'bundle')
if (!existsSync(modules)) {
  process.stderr.write(`tidelog: ${modules} is missing; run 'npm run build' first\n`)
  process.exit(1)
}
const bundleBuiltMs = statSync(join(bundleDir, 'main.js'), { throwIfNoEntry: false })?.mtimeMs ?? -1
const useBundle = process.env.TIDELOG_BUNDLE !== '0' && bundleBuiltMs >= statSync(modules).mtimeMs
const cli = useBundle ? Promise.resolve(require('./load-bundle.js').loadBundle(bundleDir).exports) : import(modules)
cli
  .then(({ runCli }) => runCli(process.argv.slice(2)))
  .then((code) => {
    process.exitCode = code
  })
