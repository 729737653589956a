# Client versions the end-to-end tests run; sourced by build.sh and run.sh.
# Override any of them from the environment.
JAVA_CLIENT_4="${JAVA_CLIENT_4:-4.2.0}"    # org.apache.kafka:kafka-clients 4.x (the version the product promises)
JAVA_CLIENT_39="${JAVA_CLIENT_39:-3.9.2}"  # org.apache.kafka:kafka-clients 3.9.x (the version the product promises)
KAFKA_TOOLS="${KAFKA_TOOLS:-4.2.0}"        # org.apache.kafka:kafka-tools (kafka-transactions.sh and friends)
# franz-go's version is pinned in tests/go/go.mod (v1.22.3, kadm v1.20.0).
