#!/usr/bin/env bash
# Kafka's bin/kafka-topics.sh: org.apache.kafka.tools.TopicCommand from the Kafka jars (see kafka-run-class.sh).
exec "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh" org.apache.kafka.tools.TopicCommand "$@"
