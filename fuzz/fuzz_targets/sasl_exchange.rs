//! Any bytes as a SASL exchange (PLAIN or SCRAM, handshake v0 or v1, tokens
//! split at 0xFF): the authenticator must refuse cleanly, never panic.
//! Run: `cargo +nightly fuzz run sasl_exchange -- -max_total_time=300`
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    rutomq::security::session::fuzz_exchange(data);
});
