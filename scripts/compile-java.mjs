#!/usr/bin/env node
// Compiles the Java programs of the conformance tests (test/compat/java, listed in
// JAVA_PROGRAMS of test/helpers/java.ts) into .build/java-<Name>, unless compiled already:
// scripts/test.sh runs it in the background while it lints, so that the tests find them
// compiled. Needs the build (dist/) and Kafka's jars (scripts/kafka-reference.sh install).
import { compileAllJava } from '../dist/test/helpers/java.js'

await compileAllJava()
