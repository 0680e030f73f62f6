#!/usr/bin/env bash
# Fetch the JVM parts the tests need from Maven Central into the machine's cache (once; later runs find them there):
#   $WMCHECK_JARS/kafka-broker/  Apache Kafka's broker (tests/kafka_broker.py)
#   $WMCHECK_JARS/spark-kafka/   Spark's Kafka connector and the jars Spark does not ship (spark.jars)
# Prints the cache directory. WMCHECK_JARS defaults to ~/.cache/wmcheck/jars.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${WMCHECK_JARS:-$HOME/.cache/wmcheck/jars}"
fetch() {  # POM NAME [copy-dependencies options]: copy the pom's runtime jars into $cache/NAME, complete or not at all
    local pom="$1" name="$2" stamp
    shift 2
    stamp="$(sha256sum "$pom" | cut -c1-16)"
    [[ -f "$cache/$name/.complete-$stamp" ]] && return 0
    rm -rf "$cache/$name.part" && mkdir -p "$cache/$name.part"
    mvn -q -B -Dstyle.color=never -f "$pom" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$cache/$name.part" "$@" >&2
    touch "$cache/$name.part/.complete-$stamp"
    rm -rf "$cache/$name" && mv "$cache/$name.part" "$cache/$name"
}
fetch "$here/kafka-broker.pom.xml" kafka-broker
fetch "$here/spark-kafka.pom.xml" spark-kafka \
    -DincludeArtifactIds=spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2
echo "$cache"
