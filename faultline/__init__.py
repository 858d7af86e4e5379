"""kafka-faultline: Jepsen-style fault injection against real Apache Kafka."""
