//! Every bound of the storage crate: reads, deletes and write buffers in
//! flight. Re-exported at the crate root.

/// Objects up to this size are read whole on a miss and kept in the read
/// cache: the partitions of a window share one object, so their consumers
/// then cost one GET per object instead of one per span.
pub const WHOLE_OBJECT_READ_BYTES_MAX: u64 = 16 << 20;
/// Names of objects the read cache evicted after a read that it remembers
/// (its ghosts, read by span afterwards; about 100 bytes each).
pub const READ_CACHE_GHOSTS_MAX: usize = 4096;
/// Spans shorter than this are never read by themselves (unless their
/// object is too large to read whole): many small GETs would cost more than
/// reading their object whole again.
pub const SPAN_READ_BYTES_MIN: u64 = 128 << 10;
/// While whole objects leave the read cache with less than this share of
/// their bytes read ([`TailCache::whole_use`](crate::TailCache::whole_use)),
/// objects are read by span...
pub const WHOLE_USE_MIN: f64 = 0.9;
/// ...except one in this many, read whole to keep measuring.
pub const WHOLE_USE_SAMPLE_EVERY: u64 = 8;
/// A distant store (S3, where a GET takes tens of milliseconds;
/// [`Storage::distant`](crate::Storage::distant)) reads every span of at
/// least this many bytes by itself, whatever
/// [`TailCache::whole_use`](crate::TailCache::whole_use) says. With 30 ms
/// GETs a whole object read for one partition's span makes its reader wait
/// for the other partitions' bytes and spends read-ahead's share of the
/// read cache on them. A first consume of 2 MiB spans with 30 ms GETs read
/// 12 % fewer bytes by span, with read-ahead refused 6-43 times instead of
/// 894-916, and ran 1.03-1.19 × as fast (two interleaved pairs, within the
/// runs' spread; `benches/results/2026-12-07-distant-spans/`); starting by
/// span and reading whole again once sampled whole reads were 0.9 (or
/// 0.95) used was no faster than before: its objects were 0.76-0.94 used,
/// and the average crossed the threshold back and forth. 1 MiB keeps the
/// GETs of this rule at most 1,024 per GiB read ($0.0004 at S3's list
/// price; writing a GiB in 4.9 MiB objects costs $0.0010 in PUTs).
pub const DISTANT_SPAN_READ_BYTES_MIN: u64 = 1 << 20;
/// Reads into the read cache in flight at once (whole objects or spans),
/// and their bytes: past either, a miss uses a ranged GET of its own and
/// read-ahead waits. Bytes, not a count alone, so that reads by span (a few
/// hundred KiB each) keep as much in flight as whole objects do: with 30 ms
/// per GET, 32 span reads carried under 300 MiB/s.
pub const READS_INFLIGHT_MAX: usize = 256;
pub const READS_INFLIGHT_BYTES_MAX: usize = 128 << 20;
/// Object deletions in flight at once (retention and orphan collection).
pub const DELETES_INFLIGHT_MAX: usize = 2;
/// An object is written in pieces of at most this many bytes, through one
/// aligned buffer.
pub const WRITE_BUFFER_BYTES: usize = 4 << 20;
/// Aligned write buffers, made on first need and kept; an upload waits for a
/// free one. So the data writes in progress at once, and their memory, are
/// bounded (8 × 4 MiB) whatever the uploads in flight: when the disk stalls,
/// uploads queue here instead of each faulting in a fresh buffer (64 uploads
/// in flight once took 250 MiB of RSS for a second). Syncs are not bounded
/// by it: a buffer goes back as soon as its data is written.
pub const WRITE_BUFFERS_MAX: usize = 8;
/// Tries to create a file this many times more when its directory is
/// missing.
pub const CREATE_ATTEMPTS_MAX: u32 = 3;
/// Unnamed files the file store keeps made ahead of uploads (each an open
/// descriptor of an empty inode): an upload takes one instead of creating
/// its file, so the inode allocation is off the produce path (on the
/// development VM's journal-less ext4 a create took 0.25-1.2 ms under load,
/// scanning past recently freed inodes). Above the uploads a burst starts at
/// once on this machine's windows (one or two per shard); an upload that
/// finds none creates its file itself.
pub const SPARE_FILES_MAX: usize = 16;
/// Reads of the file store are cut at multiples of this from their aligned
/// start: each whole block a buffer from a pool (the agent's is faulted in
/// at start), the last piece a buffer of its own size; one chunk of the
/// answer per piece.
/// A batch that straddles two pieces is copied out when it is read back.
/// 4 MiB: with 1 MiB blocks a quarter of the 256 KiB batches of a bench
/// producer straddled, and copying them cost the agent as much CPU as the
/// response copy of every byte.
pub const READ_BLOCK_BYTES: usize = 4 << 20;
/// A read shorter than a block whose piece is at least this long (a span
/// read by itself, or the last piece of an object) takes a free block when
/// no kept buffer of about its size is free, rather than fresh memory: the
/// first consume after a produce reads many spans by themselves once the
/// partitions drift apart, and each fresh buffer is pages the kernel clears
/// on first touch (`clear_page_erms` 24 % of the agent's CPU in that
/// consume, `2026-12-07-fetch-pieces/perf-H.txt`; 10 % with blocks lent,
/// `2026-12-07-lent-blocks/perf-L.txt`). In two interleaved pairs the
/// agent used 12-23 % less CPU and 150-230 MiB less RSS in that consume
/// (0-18 % less CPU in the one after it); in later pairs the runs of one
/// build spread as widely as the builds differed (`2026-12-07-lent-blocks/`).
/// A quarter block: a read pins about 4 × its bytes of the pool at most,
/// whose bound counts blocks lent so (`ReadPool::take` in file.rs).
pub const READ_BLOCK_LENT_MIN_BYTES: usize = READ_BLOCK_BYTES / 4;
/// Free read blocks a file store keeps unless told otherwise (the agent
/// sizes its pool to the read cache and the reads in flight).
pub const READ_BLOCKS_KEPT_BYTES_DEFAULT: usize = 64 << 20;
/// Free read buffers (last pieces, shorter than a block) kept for reuse by
/// the file store, in bytes: reading into a reused buffer skips zeroing and
/// faulting in a fresh one (8 % of the agent's CPU when consumers read from
/// the beginning).
pub const READ_BUFFERS_KEPT_BYTES_MAX: usize = 64 << 20;
/// Free read buffers kept at most.
pub const READ_BUFFERS_KEPT_MAX: usize = 64;
/// Reads shorter than this get a buffer of their own, not a pooled one
/// (zeroing it costs little; and a small object in the read cache must not
/// hold a large buffer it is not charged for).
pub const READ_BUFFER_POOLED_MIN_BYTES: usize = 256 << 10;
/// A pooled buffer serves a read at most 1/N longer than it: the read
/// cache charges an object its length, not its buffer's.
pub const READ_BUFFER_SLACK_DEN: usize = 8;
