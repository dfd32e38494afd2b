#!/usr/bin/env bash
# Kafka's bin/kafka-consumer-groups.sh: org.apache.kafka.tools.consumer.group.ConsumerGroupCommand from the Kafka jars (see kafka-run-class.sh).
exec "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh" org.apache.kafka.tools.consumer.group.ConsumerGroupCommand "$@"
