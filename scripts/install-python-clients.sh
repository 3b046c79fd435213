#!/usr/bin/env bash
# The PyPI Python clients of the conformance suite (issue 32): confluent-kafka 2.16.1 (with
# its bundled modern librdkafka, and its schema registry extras: Avro, JSON Schema and
# Protobuf serializers, issue 36) and aiokafka 0.14.0, pinned with hashes in
# test/compat/python/requirements.txt, installed into a virtualenv of Debian's Python at
# .build/pyenv (git ignores .build/). Prints the venv's python.
#
# Nothing is fetched twice: the venv is rebuilt only when requirements.txt changed (its
# copy is kept in the venv as the marker of a complete install), and the wheels are kept in
# .build/python-wheels, which a rebuild installs from without asking the registry (pip's
# own HTTP cache does not keep them: the registry's answers here say not to cache).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
requirements="$root/test/compat/python/requirements.txt"
venv="$root/.build/pyenv"
marker="$venv/.requirements.txt"
# Debian's Python (python3-venv), not whatever python3 is first on PATH: the hashes are
# those of its wheels (CPython 3.11).
python="${TIDELOG_VENV_PYTHON:-/usr/bin/python3}"

if [ -x "$venv/bin/python" ] && [ -f "$marker" ] && cmp -s "$requirements" "$marker"; then
  echo "$venv/bin/python"
  exit 0
fi

# The marker is written last, so an interrupted install is redone from scratch.
rm -rf "$venv"
"$python" -m venv "$venv" >&2
wheels="$root/.build/python-wheels"
pip=("$venv/bin/pip" --quiet --disable-pip-version-check --no-input)
install=(install --only-binary=:all: --require-hashes -r "$requirements")
# Offline first; only a wheel missing from the folder is downloaded (hashes checked both times).
if ! "${pip[@]}" "${install[@]}" --no-index --find-links "$wheels" >/dev/null 2>&1; then
  "${pip[@]}" download --only-binary=:all: --require-hashes -r "$requirements" -d "$wheels" >&2
  "${pip[@]}" "${install[@]}" --no-index --find-links "$wheels" >&2
fi
"$venv/bin/python" -c 'import confluent_kafka, aiokafka, cramjam
import confluent_kafka.schema_registry.avro, confluent_kafka.schema_registry.json_schema
import confluent_kafka.schema_registry.protobuf' >&2
cp "$requirements" "$marker"
echo "$venv/bin/python"
