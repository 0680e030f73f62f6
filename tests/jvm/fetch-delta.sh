#!/usr/bin/env bash
# Fetches the Delta Lake jars of tests/jvm/delta.pom.xml from Maven Central into the machine's jar cache,
# ${WMCHECK_JARS:-$HOME/.cache/wmcheck/jars}/delta (nothing is fetched when they are there), and prints that folder.
# .ci/run calls it and exports WMCHECK_DELTA_JARS with what it printed; the Delta tests hand its jars to Spark.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${WMCHECK_JARS:-$HOME/.cache/wmcheck/jars}/delta"
want=(delta-spark_4.2_2.13-4.4.0.jar delta-storage-4.4.0.jar)
have=1
for jar in "${want[@]}"; do [[ -s "$cache/$jar" ]] || have=0; done
if ((!have)); then
    mkdir -p "$cache"
    mvn -q -B dependency:copy-dependencies -f "$here/delta.pom.xml" -DoutputDirectory="$cache" >&2
    for jar in "${want[@]}"; do [[ -s "$cache/$jar" ]] || { echo "fetch-delta: $jar missing from $cache" >&2; exit 1; }; done
fi
echo "$cache"
