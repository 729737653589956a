# Client versions the end-to-end tests run; sourced by build.sh and run.sh.
# Override any of them from the environment.
JAVA_CLIENT_4="${JAVA_CLIENT_4:-4.2.0}"    # org.apache.kafka:kafka-clients 4.x (the version the product promises)
JAVA_CLIENT_39="${JAVA_CLIENT_39:-3.9.2}"  # org.apache.kafka:kafka-clients 3.9.x (the version the product promises)
JAVA_CLIENT_NEWEST="${JAVA_CLIENT_NEWEST:-4.4.0}"  # the newest kafka-clients on Maven Central (2026-11-25)
KAFKA_TOOLS="${KAFKA_TOOLS:-4.2.0}"        # org.apache.kafka:kafka-tools (kafka-transactions.sh and friends)
# franz-go: the newest is pinned in tests/go/go.mod (v1.22.3, kadm v1.20.0), the
# promised one in tests/go/franz-$FRANZ_GO_PROMISED.mod (built as roundtrip-go-$FRANZ_GO_PROMISED
# with -tags franz_1_21: no KIP-848 consumer protocol before 1.22).
FRANZ_GO_PROMISED=1.21.5
