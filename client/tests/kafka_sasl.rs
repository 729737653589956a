//! SASL_PLAINTEXT against a real Apache Kafka 4.1.1 broker (one KRaft node
//! from the Maven Central jars) with a second listener taking PLAIN,
//! SCRAM-SHA-256 and SCRAM-SHA-512. The SCRAM users are created through
//! the PLAINTEXT listener with an AlterUserScramCredentials request. For
//! each mechanism the native producer delivers records (read back over
//! PLAINTEXT) and a KafkaSource consumes them; a wrong password is refused
//! at connect; the rdkafka producer is checked with PLAIN.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::scenarios::{send_all, source_settings, verify_acknowledged};
use datum_mq::native::sasl::{salted_password, ScramHash};
use datum_mq::{
    connect, Error, KafkaProducer, KafkaProducerBackend, KafkaProducerSettings, KafkaSource,
    ProducerRecord, SaslMechanism, Security,
};
use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
use kafka_protocol::messages::AlterUserScramCredentialsRequest;
use kafka_protocol::protocol::StrBytes;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn add_scram_user(plaintext: &str, name: &str, password: &str, hash: ScramHash) {
    let conn = connect(
        plaintext,
        &Security::Plaintext,
        "admin",
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    let salt = format!("salt-of-{name}").into_bytes();
    let upsert = ScramCredentialUpsertion::default()
        .with_name(StrBytes::from_string(name.to_owned()))
        .with_mechanism(match hash {
            ScramHash::Sha256 => 1,
            ScramHash::Sha512 => 2,
        })
        .with_iterations(4096)
        .with_salt(Bytes::from(salt.clone()))
        .with_salted_password(Bytes::from(salted_password(hash, password, &salt, 4096)));
    let req = AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsert]);
    let resp = conn.call(&req, (0, 0)).await.unwrap();
    for r in resp.results {
        assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_plain_and_scram_against_apache_kafka() {
    let sasl_port = free_port();
    let kafka = tokio::task::spawn_blocking(move || {
        common::Kafka::start_with(|port, cport| {
            format!(
                "listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport},SASL_PLAINTEXT://127.0.0.1:{sasl_port}\n\
                 advertised.listeners=PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}\n\
                 listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT\n\
                 sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512\n\
                 listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"alice-secret\";\n\
                 listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;\n\
                 listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;"
            )
        })
    })
    .await
    .unwrap();
    let plaintext = kafka.bootstrap.clone();
    let sasl = format!("127.0.0.1:{sasl_port}");
    add_scram_user(&plaintext, "bob", "bob-secret", ScramHash::Sha256).await;
    add_scram_user(&plaintext, "carol", "carol-secret", ScramHash::Sha512).await;
    let mechanisms = [
        SaslMechanism::Plain {
            username: "alice".into(),
            password: "alice-secret".into(),
        },
        SaslMechanism::ScramSha256 {
            username: "bob".into(),
            password: "bob-secret".into(),
        },
        SaslMechanism::ScramSha512 {
            username: "carol".into(),
            password: "carol-secret".into(),
        },
    ];
    for (i, m) in mechanisms.iter().enumerate() {
        let topic = format!("sasl-{i}");
        let sec = Security::SaslPlaintext(m.clone());
        let p = KafkaProducer::new(
            KafkaProducerSettings::new(&sasl)
                .with_backend(KafkaProducerBackend::Native)
                .with_security(sec.clone()),
        )
        .await
        .unwrap_or_else(|e| panic!("{m:?}: {e}"));
        let records = (0..500)
            .map(|j| {
                ProducerRecord::new(&topic)
                    .with_key(format!("k{j}"))
                    .with_value(format!("{m:?} {j}"))
            })
            .collect();
        let acked = send_all(&p, records).await;
        verify_acknowledged(&plaintext, &topic, &acked).await;
        let mut src = KafkaSource::new(
            source_settings(&sasl, &format!("sasl-group-{i}")).with_security(sec),
            &[&topic],
        )
        .await
        .unwrap();
        for _ in 0..500 {
            let (_, ack) = tokio::time::timeout(Duration::from_secs(30), src.next())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            ack.ack();
        }
        src.close().await.unwrap();
        // The same user with a wrong password is refused.
        let wrong = match m.clone() {
            SaslMechanism::Plain { username, .. } => SaslMechanism::Plain {
                username,
                password: "nope".into(),
            },
            SaslMechanism::ScramSha256 { username, .. } => SaslMechanism::ScramSha256 {
                username,
                password: "nope".into(),
            },
            SaslMechanism::ScramSha512 { username, .. } => SaslMechanism::ScramSha512 {
                username,
                password: "nope".into(),
            },
        };
        let err = connect(
            &sasl,
            &Security::SaslPlaintext(wrong),
            "t",
            Duration::from_secs(10),
        )
        .await
        .err()
        .expect("a wrong password is refused");
        assert!(matches!(err, Error::Auth(_)), "{m:?}: {err}");
    }
    if cfg!(feature = "rdkafka") {
        let p = KafkaProducer::new(
            KafkaProducerSettings::new(&sasl)
                .with_backend(KafkaProducerBackend::Rdkafka)
                .with_security(Security::SaslPlaintext(mechanisms[0].clone())),
        )
        .await
        .unwrap();
        let records = (0..200)
            .map(|j| {
                ProducerRecord::new("sasl-rdkafka")
                    .with_key(format!("k{j}"))
                    .with_value(format!("rd {j}"))
            })
            .collect();
        let acked = send_all(&p, records).await;
        verify_acknowledged(&plaintext, "sasl-rdkafka", &acked).await;
    }
    tokio::task::spawn_blocking(move || drop(kafka))
        .await
        .unwrap();
}
