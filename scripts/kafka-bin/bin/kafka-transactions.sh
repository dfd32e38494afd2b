#!/usr/bin/env bash
# Kafka's bin/kafka-transactions.sh: org.apache.kafka.tools.TransactionsCommand from the Kafka jars (see kafka-run-class.sh).
exec "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh" org.apache.kafka.tools.TransactionsCommand "$@"
