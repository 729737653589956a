//! Any bytes as one request frame: decode must fail cleanly, never panic
//! or abort. Run: `cargo +nightly fuzz run request_frame -- -max_total_time=300`
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    rutomq::api::fuzz_frame(data);
});
