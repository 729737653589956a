//! Any bytes as the metrics of a PushTelemetry request (OTLP protobuf, as
//! the agent reads it): decoding must fail cleanly, never panic or abort.
//! Run: `cargo +nightly fuzz run otlp_metrics -- -max_total_time=300`
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = rutomq::telemetry::otlp::decode(data, 5_000, 1 << 20);
});
