//! Any bytes as a client certificate: reading its subject (RFC 2253) and
//! validity, then mapping it to a principal, must never panic.
//! Run: `cargo +nightly fuzz run client_certificate -- -max_total_time=300`
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Some(s) = rutomq::security::x500::summarize(data) {
        let rules = rutomq::security::x500::PrincipalMapper::parse(
            "RULE:^CN=(.*?),OU=(.*?)$/$1@$2/L,DEFAULT",
        )
        .expect("rules parse");
        let _ = rules.map(&s.subject);
    }
});
