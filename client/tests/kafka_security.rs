//! Security against a real Apache Kafka 4.1.1 broker (one KRaft node from
//! the Maven Central jars), and the same checks against a rutomq agent,
//! with four more listeners:
//! - SASL_PLAINTEXT taking PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 (the SCRAM
//!   users are created through the PLAINTEXT listener with an
//!   AlterUserScramCredentials request);
//! - SSL demanding a client certificate (mutual TLS);
//! - SASL_SSL taking the same mechanisms inside TLS;
//! - SSL with a certificate that names only "localhost" (hostname checks).
//!
//! Certificates come from a test CA made with the openssl tool. For each
//! mechanism and protocol the native producer delivers records (read back
//! over PLAINTEXT) and a KafkaSource consumes them; wrong passwords, a
//! missing client certificate, an unknown CA and a wrong host name are
//! refused; the rdkafka producer and consumer do the same for every
//! mechanism over SASL_PLAINTEXT and SASL_SSL, and over SSL with a client
//! certificate.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use common::scenarios::{admin, next_record, send_all, source_settings, verify_acknowledged};
use datum_mq::native::sasl::{salted_password, ScramHash};
use datum_mq::{
    connect, Error, KafkaConsumerBackend, KafkaProducer, KafkaProducerBackend,
    KafkaProducerSettings, KafkaSource, Pem, ProducerRecord, SaslMechanism, Security, TlsSettings,
};
use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
use kafka_protocol::messages::AlterUserScramCredentialsRequest;
use kafka_protocol::protocol::StrBytes;

const NATIVE: (KafkaProducerBackend, KafkaConsumerBackend) =
    (KafkaProducerBackend::Native, KafkaConsumerBackend::Native);
const RDKAFKA: (KafkaProducerBackend, KafkaConsumerBackend) =
    (KafkaProducerBackend::Rdkafka, KafkaConsumerBackend::Rdkafka);

async fn add_scram_user(plaintext: &str, name: &str, password: &str, hash: ScramHash) {
    let conn = admin(plaintext).await;
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

/// `openssl req` arguments for a new unencrypted P-256 key.
const NEW_EC_KEY: [&str; 5] = [
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
];

/// Runs `openssl` with `args` in `dir`.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the openssl tool runs");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA (ca.pem), certificates it signs and a second, unrelated CA
/// (other-ca.pem). Keys are unencrypted PKCS#8 P-256.
struct Certs {
    dir: PathBuf,
}

impl Certs {
    fn make() -> Certs {
        // One directory per call: the tests of this file run at once.
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("datum-mq-certs-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for ca in ["ca", "other-ca"] {
            openssl(
                &dir,
                &[
                    &["req", "-x509"][..],
                    &NEW_EC_KEY,
                    &[
                        "-keyout",
                        &format!("{ca}.key"),
                        "-out",
                        &format!("{ca}.pem"),
                        "-days",
                        "2",
                        "-subj",
                        &format!("/CN=datum-mq test {ca}"),
                    ],
                ]
                .concat(),
            );
        }
        let certs = Certs { dir };
        certs.sign(
            "server",
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth",
        );
        certs.sign(
            "localhost-only",
            "subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth",
        );
        certs.sign("client", "extendedKeyUsage=clientAuth");
        certs
    }

    /// `name.key`, `name.pem` (signed by ca) and `name-keystore.pem` (key
    /// then certificate, Kafka's PEM keystore).
    fn sign(&self, name: &str, extensions: &str) {
        let ext = self.dir.join(format!("{name}.ext"));
        std::fs::write(&ext, extensions).unwrap();
        openssl(
            &self.dir,
            &[
                &["req"][..],
                &NEW_EC_KEY,
                &[
                    "-keyout",
                    &format!("{name}.key"),
                    "-out",
                    &format!("{name}.csr"),
                    "-subj",
                    &format!("/CN={name}"),
                ],
            ]
            .concat(),
        );
        openssl(
            &self.dir,
            &[
                "x509",
                "-req",
                "-in",
                &format!("{name}.csr"),
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &format!("{name}.pem"),
                "-days",
                "2",
                "-extfile",
                &format!("{name}.ext"),
            ],
        );
        let key = std::fs::read_to_string(self.path(&format!("{name}.key"))).unwrap();
        let cert = std::fs::read_to_string(self.path(&format!("{name}.pem"))).unwrap();
        std::fs::write(self.path(&format!("{name}-keystore.pem")), key + &cert).unwrap();
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// Trusts the test CA.
    fn tls(&self) -> TlsSettings {
        TlsSettings::new().with_ca_pem_file(self.path("ca.pem"))
    }

    /// Trusts the test CA and presents the client certificate.
    fn mtls(&self) -> TlsSettings {
        self.tls().with_client_cert(
            Pem::File(self.path("client.pem")),
            Pem::File(self.path("client.key")),
        )
    }
}

impl Drop for Certs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `n` keyed records through the producer backend over `sec`, checked on
/// the PLAINTEXT listener, then consumed by a KafkaSource of the consumer
/// backend over `sec`.
async fn roundtrip(
    bootstrap: &str,
    plaintext: &str,
    sec: &Security,
    topic: &str,
    (producer, consumer): (KafkaProducerBackend, KafkaConsumerBackend),
    n: usize,
) {
    let p = KafkaProducer::new(
        KafkaProducerSettings::new(bootstrap)
            .with_backend(producer)
            .with_security(sec.clone()),
    )
    .await
    .unwrap_or_else(|e| panic!("{producer:?} {sec:?}: {e}"));
    let records = (0..n)
        .map(|j| {
            ProducerRecord::new(topic)
                .with_key(format!("k{j}"))
                .with_value(format!("{sec:?} {j}"))
        })
        .collect();
    let acked = send_all(&p, records).await;
    verify_acknowledged(plaintext, topic, &acked).await;
    let mut src = KafkaSource::new(
        source_settings(bootstrap, &format!("group-{topic}"))
            .with_backend(consumer)
            .with_security(sec.clone()),
        &[topic],
    )
    .await
    .unwrap();
    let mut seen = std::collections::BTreeSet::new();
    while seen.len() < n {
        let (r, ack) = next_record(&mut src, Duration::from_secs(30)).await;
        seen.insert((r.partition, r.offset));
        ack.ack();
    }
    src.close().await.unwrap();
}

async fn refused(bootstrap: &str, sec: Security) -> Error {
    connect(bootstrap, &sec, "t", Duration::from_secs(10))
        .await
        .err()
        .unwrap_or_else(|| panic!("{sec:?} to {bootstrap} is refused"))
}

fn with_password(m: &SaslMechanism, password: &str) -> SaslMechanism {
    let password = password.to_owned();
    match m.clone() {
        SaslMechanism::Plain { username, .. } => SaslMechanism::Plain { username, password },
        SaslMechanism::ScramSha256 { username, .. } => {
            SaslMechanism::ScramSha256 { username, password }
        }
        SaslMechanism::ScramSha512 { username, .. } => {
            SaslMechanism::ScramSha512 { username, password }
        }
    }
}

/// Every SASL mechanism over SASL_PLAINTEXT and SASL_SSL (alice with
/// PLAIN, bob with SCRAM-SHA-256, carol with SCRAM-SHA-512; the native
/// backends, and rdkafka's when built), wrong passwords refused; SSL with a
/// client certificate, refused without one; a broker certificate of an
/// unknown CA refused.
async fn check_matrix(certs: &Certs, plaintext: &str, sasl: &str, ssl: &str, sasl_ssl: &str) {
    let plaintext = plaintext.to_owned();
    let (sasl, ssl, sasl_ssl) = (sasl.to_owned(), ssl.to_owned(), sasl_ssl.to_owned());
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

    // SASL_PLAINTEXT and SASL_SSL, each mechanism; wrong passwords refused.
    for (i, m) in mechanisms.iter().enumerate() {
        let plain_sec = Security::SaslPlaintext(m.clone());
        roundtrip(
            &sasl,
            &plaintext,
            &plain_sec,
            &format!("sasl-{i}"),
            NATIVE,
            500,
        )
        .await;
        let ssl_sec = Security::SaslSsl(m.clone(), certs.tls());
        roundtrip(
            &sasl_ssl,
            &plaintext,
            &ssl_sec,
            &format!("sasl-ssl-{i}"),
            NATIVE,
            500,
        )
        .await;
        if cfg!(feature = "rdkafka") {
            roundtrip(
                &sasl,
                &plaintext,
                &plain_sec,
                &format!("rd-sasl-{i}"),
                RDKAFKA,
                200,
            )
            .await;
            roundtrip(
                &sasl_ssl,
                &plaintext,
                &ssl_sec,
                &format!("rd-sasl-ssl-{i}"),
                RDKAFKA,
                200,
            )
            .await;
        }
        let wrong = with_password(m, "nope");
        let err = refused(&sasl, Security::SaslPlaintext(wrong.clone())).await;
        assert!(matches!(err, Error::Auth(_)), "{m:?}: {err}");
        let err = refused(&sasl_ssl, Security::SaslSsl(wrong, certs.tls())).await;
        assert!(matches!(err, Error::Auth(_)), "{m:?} over TLS: {err}");
    }

    // SSL with a client certificate; without one the broker refuses.
    let mtls = Security::Ssl(certs.mtls());
    roundtrip(&ssl, &plaintext, &mtls, "ssl-mtls", NATIVE, 500).await;
    if cfg!(feature = "rdkafka") {
        roundtrip(&ssl, &plaintext, &mtls, "rd-ssl-mtls", RDKAFKA, 200).await;
    }
    refused(&ssl, Security::Ssl(certs.tls())).await;

    // A broker whose certificate another CA signed is refused.
    let other = TlsSettings::new().with_ca_pem_file(certs.path("other-ca.pem"));
    let err = refused(&sasl_ssl, Security::SaslSsl(mechanisms[0].clone(), other)).await;
    assert!(matches!(err, Error::Tls(_)), "unknown CA: {err}");
}

/// The same matrix against a rutomq agent: SCRAM users made over the
/// PLAINTEXT listener (alice's SHA-512 credential is what PLAIN checks),
/// client certificates required on its SSL listener.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_and_tls_against_rutomq() {
    let certs = Certs::make();
    let [sasl_port, ssl_port, sasl_ssl_port] = [(); 3].map(|_| common::free_port());
    let path = |f: &str| certs.path(f).display().to_string();
    let (cert, key, ca) = (path("server.pem"), path("server.key"), path("ca.pem"));
    let agent = tokio::task::spawn_blocking(move || {
        common::Agent::start_with(|plaintext| {
            [
                "--listeners".to_owned(),
                format!(
                    "PLAINTEXT://{plaintext},SASL_PLAINTEXT://127.0.0.1:{sasl_port},\
                     SSL://127.0.0.1:{ssl_port},SASL_SSL://127.0.0.1:{sasl_ssl_port}"
                ),
                "--ssl-certificate-location".to_owned(),
                cert,
                "--ssl-key-location".to_owned(),
                key,
                "--ssl-truststore-location".to_owned(),
                ca,
                "--ssl-client-auth".to_owned(),
                "required".to_owned(),
                "--default-partitions".to_owned(),
                common::scenarios::PARTITIONS.to_string(),
            ]
            .to_vec()
        })
    })
    .await
    .unwrap();
    let plaintext = agent.bootstrap.clone();
    let addr = |port: u16| format!("127.0.0.1:{port}");
    add_scram_user(&plaintext, "alice", "alice-secret", ScramHash::Sha512).await;
    add_scram_user(&plaintext, "bob", "bob-secret", ScramHash::Sha256).await;
    add_scram_user(&plaintext, "carol", "carol-secret", ScramHash::Sha512).await;
    check_matrix(
        &certs,
        &plaintext,
        &addr(sasl_port),
        &addr(ssl_port),
        &addr(sasl_ssl_port),
    )
    .await;
    tokio::task::spawn_blocking(move || drop(agent))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_and_tls_against_apache_kafka() {
    let certs = Certs::make();
    let [sasl_port, ssl_port, sasl_ssl_port, named_port] = [(); 4].map(|_| common::free_port());
    let store = |name: &str| {
        certs
            .path(&format!("{name}-keystore.pem"))
            .display()
            .to_string()
    };
    let (server, named, ca) = (
        store("server"),
        store("localhost-only"),
        certs.path("ca.pem"),
    );
    let ca = ca.display().to_string();
    let kafka = tokio::task::spawn_blocking(move || {
        common::Kafka::start_with(|port, cport| {
            let jaas = |listener: &str| {
                format!(
                    "listener.name.{listener}.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"alice-secret\";\n\
                     listener.name.{listener}.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;\n\
                     listener.name.{listener}.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;\n"
                )
            };
            format!(
                "listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport},SASL_PLAINTEXT://127.0.0.1:{sasl_port},SSL://127.0.0.1:{ssl_port},SASL_SSL://127.0.0.1:{sasl_ssl_port},NAMED://127.0.0.1:{named_port}\n\
                 advertised.listeners=PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port},SSL://127.0.0.1:{ssl_port},SASL_SSL://127.0.0.1:{sasl_ssl_port},NAMED://localhost:{named_port}\n\
                 listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,NAMED:SSL\n\
                 sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512\n\
                 {}{}\
                 ssl.keystore.type=PEM\n\
                 ssl.keystore.location={server}\n\
                 ssl.truststore.type=PEM\n\
                 ssl.truststore.location={ca}\n\
                 listener.name.ssl.ssl.client.auth=required\n\
                 listener.name.named.ssl.keystore.type=PEM\n\
                 listener.name.named.ssl.keystore.location={named}\n",
                jaas("sasl_plaintext"),
                jaas("sasl_ssl"),
            )
        })
    })
    .await
    .unwrap();
    let plaintext = kafka.bootstrap.clone();
    let addr = |port: u16| format!("127.0.0.1:{port}");
    let (sasl, ssl, sasl_ssl) = (addr(sasl_port), addr(ssl_port), addr(sasl_ssl_port));
    add_scram_user(&plaintext, "bob", "bob-secret", ScramHash::Sha256).await;
    add_scram_user(&plaintext, "carol", "carol-secret", ScramHash::Sha512).await;
    check_matrix(&certs, &plaintext, &sasl, &ssl, &sasl_ssl).await;

    // Host names: the NAMED listener's certificate names only localhost.
    // Dialled as 127.0.0.1 it is refused, unless hostname checks are off;
    // dialled as localhost (also what its metadata advertises) it works.
    let named_ip = addr(named_port);
    let err = refused(&named_ip, Security::Ssl(certs.tls())).await;
    assert!(matches!(err, Error::Tls(_)), "wrong host name: {err}");
    let lax = Security::Ssl(certs.tls().without_hostname_verification());
    connect(&named_ip, &lax, "t", Duration::from_secs(10))
        .await
        .unwrap();
    // The CA is still checked with hostname checks off.
    let other_lax = TlsSettings::new()
        .with_ca_pem_file(certs.path("other-ca.pem"))
        .without_hostname_verification();
    let err = refused(&named_ip, Security::Ssl(other_lax)).await;
    assert!(matches!(err, Error::Tls(_)), "unknown CA, lax names: {err}");
    let named_host = format!("localhost:{named_port}");
    let named_sec = Security::Ssl(certs.tls());
    roundtrip(&named_host, &plaintext, &named_sec, "named", NATIVE, 500).await;

    // Bad PEM fails when the client is made, naming the file.
    let missing = Security::Ssl(TlsSettings::new().with_ca_pem_file(certs.path("nope.pem")));
    let err = KafkaProducer::new(
        KafkaProducerSettings::new(&ssl)
            .with_backend(KafkaProducerBackend::Native)
            .with_security(missing),
    )
    .await
    .err()
    .expect("a missing CA file is refused");
    assert!(
        matches!(&err, Error::Config(m) if m.contains("nope.pem")),
        "{err}"
    );

    tokio::task::spawn_blocking(move || drop(kafka))
        .await
        .unwrap();
}
