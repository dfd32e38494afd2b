#!/usr/bin/env bash
# Kafka's bin/kafka-run-class.sh, reduced: runs CLASS from the Apache Kafka jars that
# scripts/test fetches from Maven Central into target/kafka-libs (or $KAFKA_LIBS), with
# $CLASSPATH in front (librdkafka's tests/java/run-class.sh puts its compiled classes there).
# Logging as Kafka's tools-log4j2 config: warnings and errors to stderr.
#
#   kafka-run-class.sh CLASS [ARGS...]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
libs=${KAFKA_LIBS:-$here/../../../target/kafka-libs}
if ! ls "$libs"/kafka-tools-*.jar >/dev/null 2>&1; then
  echo "$0: no Kafka jars in $libs (mvn -q -B -f bench/kafka/pom.xml dependency:copy-dependencies -DoutputDirectory=\$PWD/target/kafka-libs)" >&2
  exit 1
fi
cp="$libs/*"
[ -z "${CLASSPATH:-}" ] || cp="$CLASSPATH:$cp"
exec java ${KAFKA_HEAP_OPTS:--Xmx256m} -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
  -Dlog4j2.configurationFile="$here/../tools-log4j2.yaml" ${KAFKA_OPTS:-} -cp "$cp" "$@"
