//! Any bytes as one stored batch a compaction pass reads: taking it apart
//! and rebuilding it must fail cleanly, never panic or abort; and as stored
//! bytes read back in two chunks, walked as in one buffer.
//! Run: `cargo +nightly fuzz run stored_batch -- -max_total_time=300`
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    rutomq::compact::fuzz_stored_batch(data);
    rutomq::compact::fuzz_stored_chunks(data);
});
