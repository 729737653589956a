//! The `file://` store: a local directory holding one file per object.
//!
//! Reads, listings and deletes go to `object_store`'s `LocalFileSystem`.
//! New objects are written here instead, because an upload is on the
//! produce path and the generic put costs too much there: it writes a
//! staging file through the page cache, renames it into place and then
//! syncs. On the development VM copying into the page cache alone took
//! 1.3 s of kernel CPU per GiB written (`dd ... conv=fsync`), against
//! 0.22 s with `O_DIRECT`.
//!
//! A new object's file gets its final name first: an unnamed file made
//! ahead of time (`O_TMPFILE`, [`Spares`]) is linked there, or, when none is
//! ready, the file is created there with `O_CREAT | O_EXCL`. The object is
//! written into it with `O_DIRECT` when the filesystem takes it, from an
//! aligned, reused buffer. Then the file and its directory are synced
//! before the put returns. The directory sync runs on its own thread while
//! the data is written, one sync for all the uploads in flight together
//! ([`DirSyncs`]). No staging file is needed: object keys are
//! unique per upload, and an object is only read once PostgreSQL points at
//! it, which happens after the put returned. A crash in the middle leaves a
//! partial file that nothing references; the orphan collector deletes it
//! like any other uncommitted upload.
//!
//! Overwriting an existing key (which rutomq never does) and the put modes
//! this path does not handle are passed to `LocalFileSystem`, which
//! replaces files atomically.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::ops::Range;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path as FsPath, PathBuf};
use std::sync::{Arc, Mutex};

use crate::limits::{
    CREATE_ATTEMPTS_MAX, READ_BLOCKS_KEPT_BYTES_DEFAULT, READ_BLOCK_BYTES,
    READ_BLOCK_LENT_MIN_BYTES, READ_BUFFERS_KEPT_BYTES_MAX, READ_BUFFERS_KEPT_MAX,
    READ_BUFFER_POOLED_MIN_BYTES, READ_BUFFER_SLACK_DEN, SPARE_FILES_MAX, WRITE_BUFFERS_MAX,
    WRITE_BUFFER_BYTES,
};
use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetRange, GetResult, GetResultPayload, ListResult, MultipartUpload,
    ObjectMeta, ObjectStore, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult,
    Result,
};

/// File offsets, lengths and buffer addresses of `O_DIRECT` writes are
/// multiples of this (the largest logical block size in use; 512-byte
/// devices accept it too).
pub const DIRECT_ALIGN: usize = 4096;

#[derive(Debug)]
pub struct FileStore {
    writer: Arc<Writer>,
    read_pool: Arc<ReadPool>,
    inner: LocalFileSystem,
}

#[derive(Debug)]
struct Writer {
    root: PathBuf,
    /// Whether the filesystem under `root` accepts `O_DIRECT` (older tmpfs
    /// does not); without it, writes go through the page cache, still
    /// synced.
    direct: bool,
    buffers: Mutex<WriteBuffers>,
    /// Signalled when a buffer comes back.
    buffer_returned: std::sync::Condvar,
    /// The last directory whose entry in its parent is known synced: a
    /// writer that finds a bucket another writer just created syncs the
    /// parent itself before acknowledging, once per bucket.
    durable_dir: Mutex<Option<PathBuf>>,
    /// Directory syncs, shared by concurrent uploads and run while their
    /// data is written.
    dir_syncs: Arc<DirSyncs>,
    /// Unnamed files made ahead of uploads; `None` where the filesystem
    /// cannot make or link them.
    spares: Option<Arc<Spares>>,
}

impl FileStore {
    /// A store over the existing directory `root`; new objects are written
    /// with `O_DIRECT` when its filesystem takes it.
    pub fn new(root: &FsPath) -> Result<FileStore> {
        Self::open(root, true)
    }

    /// Same, but never with `O_DIRECT`.
    pub fn buffered(root: &FsPath) -> Result<FileStore> {
        Self::open(root, false)
    }

    fn open(root: &FsPath, try_direct: bool) -> Result<FileStore> {
        let root = root.canonicalize().map_err(|e| generic(e, root))?;
        // No automatic cleanup of empty directories: it raced with writers
        // creating files in the same bucket. Old empty buckets are removed
        // after deletes instead (`remove_old_bucket`).
        let inner = LocalFileSystem::new_with_prefix(&root)?.with_fsync(true);
        let direct = try_direct && probe_direct(&root);
        tracing::info!(root = %root.display(), direct, "file object store");
        let dir_syncs = DirSyncs::start().map_err(|e| generic(e, &root))?;
        let spares = Spares::start(&root, direct);
        Ok(FileStore {
            writer: Arc::new(Writer {
                root,
                direct,
                buffers: Mutex::new(WriteBuffers::default()),
                buffer_returned: std::sync::Condvar::new(),
                durable_dir: Mutex::new(None),
                dir_syncs,
                spares,
            }),
            read_pool: Arc::new(ReadPool::new(READ_BLOCKS_KEPT_BYTES_DEFAULT)),
            inner,
        })
    }

    /// The same store, keeping up to `bytes` of free read blocks (the read
    /// cache and the reads in flight at their bounds), with `fault_in` all
    /// of them made and faulted in now.
    pub fn with_read_blocks(mut self, bytes: usize, fault_in: bool) -> FileStore {
        self.read_pool = Arc::new(if fault_in && self.direct() {
            ReadPool::faulted_in(bytes)
        } else {
            ReadPool::new(bytes)
        });
        self
    }

    /// Whether new objects are written with `O_DIRECT`.
    pub fn direct(&self) -> bool {
        self.writer.direct
    }

    /// The same store with `spares` instead of its own (tests: none, or a
    /// fixed set without the thread).
    #[cfg(test)]
    fn with_spares(mut self, spares: Option<Arc<Spares>>) -> FileStore {
        let writer = Arc::get_mut(&mut self.writer).expect("a store not yet shared");
        if let Some(own) = std::mem::replace(&mut writer.spares, spares) {
            own.close();
        }
        self
    }

    /// The file of `location`, when its key is plain enough that
    /// `LocalFileSystem` maps it to the same file (no escaping involved).
    fn file_of(&self, location: &Path) -> Option<PathBuf> {
        let key = location.as_ref();
        let plain = !key.is_empty()
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'-' | b'_'))
            && location
                .parts()
                .all(|p| p.as_ref() != "." && p.as_ref() != "..");
        plain.then(|| self.writer.root.join(key))
    }
}

/// Buffers for `O_DIRECT` reads, lent out inside the `Bytes` chunks a read
/// returns ([`PooledRead`]) and back here when their last slice drops (the
/// read cache evicts them and the responses holding their records are
/// sent). A read is cut at multiples of [`READ_BLOCK_BYTES`] from its
/// aligned start: each whole block comes from `blocks`; a last piece
/// shorter than a block from `buffers` when it is at least
/// [`READ_BUFFER_POOLED_MIN_BYTES`] (or a free block, when none of them fits
/// and it is at least [`READ_BLOCK_LENT_MIN_BYTES`]), else it is a buffer of
/// its own.
///
/// Why whole blocks, faulted in at start: with a buffer per read of the
/// read's size, whole-object reads came from the allocator fresh whenever
/// no free buffer was close enough in size, and on the development VM
/// (Firecracker) the first touch of fresh memory costs ~3 ms per 2 MiB huge
/// page: the kernel's clear_page was 30 % of the agent's CPU in the first
/// consume after a produce. One block size fits every whole-object read, so
/// blocks faulted in once serve them all.
#[derive(Debug)]
struct ReadPool {
    blocks: Mutex<Blocks>,
    /// Blocks kept free, plus those lent to reads shorter than a block, at
    /// most.
    blocks_kept_max: usize,
    /// Free buffers of other sizes (see [`ReadPool::take`]).
    buffers: Mutex<Vec<Vec<u8>>>,
}

#[derive(Debug, Default)]
struct Blocks {
    free: Vec<Vec<u8>>,
    /// Blocks lent to reads shorter than a block (see [`ReadPool::take`]).
    lent_short: usize,
}

impl ReadPool {
    /// A pool keeping at most `blocks_bytes` of free blocks, none made yet.
    fn new(blocks_bytes: usize) -> ReadPool {
        ReadPool {
            blocks: Mutex::new(Blocks::default()),
            blocks_kept_max: blocks_bytes / READ_BLOCK_BYTES,
            buffers: Mutex::new(Vec::new()),
        }
    }

    /// The same, with all of its blocks made and faulted in now.
    fn faulted_in(blocks_bytes: usize) -> ReadPool {
        let pool = ReadPool::new(blocks_bytes);
        let blocks = (0..pool.blocks_kept_max)
            .map(|_| {
                let mut b = vec![0u8; READ_BLOCK_BYTES + DIRECT_ALIGN];
                // A write per page (not of 0: fresh memory is known zero,
                // and the write could be skipped).
                for x in b.iter_mut().step_by(DIRECT_ALIGN) {
                    *x = 1;
                }
                std::hint::black_box(&mut b);
                b
            })
            .collect();
        pool.blocks.lock().expect("read blocks lock").free = blocks;
        pool
    }

    /// A buffer of at least `len` bytes (a piece and the alignment slack),
    /// lent until its [`PooledRead`] drops: a block when `len` is one (a
    /// free one, or a new one); for another large read the smallest free
    /// buffer at most 1/[`READ_BUFFER_SLACK_DEN`] longer, else for a piece
    /// of at least [`READ_BLOCK_LENT_MIN_BYTES`] a free block; else a new
    /// one of exactly `len`.
    ///
    /// A block lent to a shorter read holds more than the read cache is
    /// charged for, so such blocks count against the pool's bound until
    /// they are back ([`ReadPool::give`]): the pool's blocks, free or lent
    /// short, stay within `blocks_kept_max`, and the agent's memory beyond
    /// them within what the read cache (and the reads in flight) are charged
    /// for, as before. While spans hold the pool's blocks, whole-block reads
    /// make fresh ones (let go when they are back): lending at most half
    /// the pool to spans measured no better (`benches/results/
    /// 2026-12-07-lent-blocks/ab-local-LM.txt`).
    fn take(self: &Arc<Self>, len: usize) -> PooledRead {
        let lent = |buf: Vec<u8>, short_block: bool| PooledRead {
            buf,
            short_block,
            pool: self.clone(),
        };
        if len == READ_BLOCK_BYTES + DIRECT_ALIGN {
            if let Some(b) = self.blocks.lock().expect("read blocks lock").free.pop() {
                return lent(b, false);
            }
        } else if len >= READ_BUFFER_POOLED_MIN_BYTES {
            let mut free = self.buffers.lock().expect("read buffers lock");
            let fit = free
                .iter()
                .enumerate()
                .filter(|(_, b)| b.len() >= len && b.len() - len <= len / READ_BUFFER_SLACK_DEN)
                .min_by_key(|(_, b)| b.len())
                .map(|(i, _)| i);
            if let Some(i) = fit {
                return lent(free.swap_remove(i), false);
            }
            drop(free);
            if (READ_BLOCK_LENT_MIN_BYTES + DIRECT_ALIGN..READ_BLOCK_BYTES + DIRECT_ALIGN)
                .contains(&len)
            {
                let mut blocks = self.blocks.lock().expect("read blocks lock");
                if let Some(b) = blocks.free.pop() {
                    blocks.lent_short += 1;
                    return lent(b, true);
                }
            }
        }
        lent(vec![0u8; len], false)
    }

    /// Takes `buf` back (from a [`PooledRead`]; `short_block`: a block
    /// that was lent to a shorter read), or lets it go past the bounds.
    fn give(&self, buf: Vec<u8>, short_block: bool) {
        if buf.len() == READ_BLOCK_BYTES + DIRECT_ALIGN {
            let mut blocks = self.blocks.lock().expect("read blocks lock");
            if short_block {
                blocks.lent_short -= 1;
            }
            if blocks.free.len() + blocks.lent_short < self.blocks_kept_max {
                blocks.free.push(buf);
            }
            return;
        }
        if buf.len() < READ_BUFFER_POOLED_MIN_BYTES {
            return;
        }
        let mut free = self.buffers.lock().expect("read buffers lock");
        let kept: usize = free.iter().map(Vec::len).sum();
        if free.len() < READ_BUFFERS_KEPT_MAX && kept + buf.len() <= READ_BUFFERS_KEPT_BYTES_MAX {
            free.push(buf);
        }
    }

    #[cfg(test)]
    fn free_blocks(&self) -> usize {
        self.blocks.lock().unwrap().free.len()
    }
}

/// A read buffer lent out as the owner of a `Bytes`; back to the pool on
/// drop.
struct PooledRead {
    buf: Vec<u8>,
    /// A block lent to a read shorter than a block.
    short_block: bool,
    pool: Arc<ReadPool>,
}

impl AsRef<[u8]> for PooledRead {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for PooledRead {
    fn drop(&mut self) {
        self.pool
            .give(std::mem::take(&mut self.buf), self.short_block);
    }
}

/// The pool of aligned write buffers.
#[derive(Debug, Default)]
struct WriteBuffers {
    free: Vec<Vec<u8>>,
    /// Buffers made so far (free or in use); never above
    /// [`WRITE_BUFFERS_MAX`].
    made: usize,
}

impl Writer {
    /// A write buffer: a free one, a new one while fewer than
    /// [`WRITE_BUFFERS_MAX`] exist, else the next one returned (blocking
    /// this thread, which is a blocking-pool thread already).
    fn take_buffer(&self) -> Vec<u8> {
        let mut pool = self.buffers.lock().expect("write buffers lock");
        loop {
            if let Some(buf) = pool.free.pop() {
                return buf;
            }
            if pool.made < WRITE_BUFFERS_MAX {
                pool.made += 1;
                drop(pool);
                return vec![0u8; WRITE_BUFFER_BYTES + DIRECT_ALIGN];
            }
            pool = self.buffer_returned.wait(pool).expect("write buffers lock");
        }
    }

    /// Syncs `dir`'s parent once per directory: another writer may have
    /// created `dir` and not synced its parent yet.
    fn ensure_dir_durable(&self, dir: &FsPath) -> io::Result<()> {
        let mut durable = self.durable_dir.lock().expect("durable dir lock");
        if durable.as_deref() != Some(dir) {
            sync_dir(dir.parent().unwrap_or(&self.root))?;
            *durable = Some(dir.to_owned());
        }
        Ok(())
    }

    fn return_buffer(&self, buf: Vec<u8>) {
        self.buffers
            .lock()
            .expect("write buffers lock")
            .free
            .push(buf);
        self.buffer_returned.notify_one();
    }

    /// Writes `payload` as the new file `path`. `Ok(None)`: it exists.
    fn write_new(&self, path: &FsPath, payload: &PutPayload) -> io::Result<Option<File>> {
        let dir = path.parent().unwrap_or(&self.root);
        let spare = self.spares.as_ref().and_then(|s| Some((s, s.take()?)));
        let made = match spare {
            Some((spares, file)) => match self.in_dir(dir, || link_unnamed(&file, path)) {
                Ok(linked) => linked.map(|()| file),
                // Linked in the root at start but not here (another mount
                // or project quota below the root, /proc gone): no more
                // spares; this upload creates its file.
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "cannot name a spare file; uploads create their files from now on");
                    spares.close();
                    self.in_dir(dir, || create_new(path, self.direct))?
                }
            },
            None => self.in_dir(dir, || create_new(path, self.direct))?,
        };
        let Some(file) = made else {
            return Ok(None);
        };
        let finished = self.ensure_dir_durable(dir).and_then(|()| {
            // The new entry is synced while the data is written: a directory
            // sync that starts after the entry was made covers it.
            let entry_synced = self.dir_syncs.request(dir);
            self.write_payload(&file, payload)?;
            file.sync_all().and_then(|()| entry_synced.wait())
        });
        if let Err(e) = finished {
            // Nothing points at a file whose put failed: do not leave it.
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
        Ok(Some(file))
    }

    /// Runs `make`, which makes an entry in `dir`: when `dir` is missing
    /// it is created (with its parents) and `make` runs again, a few times
    /// (an old bucket's cleanup may remove it again meanwhile). `Ok(None)`:
    /// the entry exists.
    fn in_dir<T>(&self, dir: &FsPath, make: impl Fn() -> io::Result<T>) -> io::Result<Option<T>> {
        let mut attempt = 0;
        loop {
            match make() {
                Ok(t) => return Ok(Some(t)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::NotFound && attempt < CREATE_ATTEMPTS_MAX => {
                    attempt += 1;
                    create_dirs_synced(dir, &self.root)?;
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn write_payload(&self, file: &File, payload: &PutPayload) -> io::Result<()> {
        if self.direct {
            let mut buf = self.take_buffer();
            let r = write_direct(file, payload, &mut buf);
            self.return_buffer(buf);
            r
        } else {
            write_buffered(file, payload)
        }
    }
}

impl fmt::Display for FileStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "FileStore({}, direct: {})",
            self.writer.root.display(),
            self.writer.direct
        )
    }
}

fn generic(e: io::Error, path: &FsPath) -> object_store::Error {
    object_store::Error::Generic {
        store: "FileStore",
        source: format!("{}: {e}", path.display()).into(),
    }
}

fn create_new(path: &FsPath, direct: bool) -> io::Result<File> {
    let mut o = OpenOptions::new();
    o.write(true).create_new(true);
    if direct {
        o.custom_flags(libc::O_DIRECT);
    }
    o.open(path)
}

/// Whether `dir`'s filesystem takes an aligned `O_DIRECT` write.
fn probe_direct(dir: &FsPath) -> bool {
    let probe = dir.join(format!(".direct-probe-{}", uuid::Uuid::new_v4().simple()));
    let ok = create_new(&probe, true).and_then(|f| {
        let buf = vec![0u8; 2 * DIRECT_ALIGN];
        let at = aligned_start(&buf);
        f.write_all_at(&buf[at..at + DIRECT_ALIGN], 0)
    });
    let _ = std::fs::remove_file(&probe);
    ok.is_ok()
}

/// Where the first `DIRECT_ALIGN`-aligned byte of `buf` is.
fn aligned_start(buf: &[u8]) -> usize {
    buf.as_ptr().align_offset(DIRECT_ALIGN)
}

/// Copies `payload` into the aligned part of `buf` and writes it with
/// aligned writes; the last one is padded with zeros, then the file is cut
/// back to the payload's length.
fn write_direct(file: &File, payload: &PutPayload, buf: &mut [u8]) -> io::Result<()> {
    let at = aligned_start(buf);
    let window = &mut buf[at..];
    let cap = window.len() / DIRECT_ALIGN * DIRECT_ALIGN;
    let mut filled = 0usize;
    let mut offset = 0u64;
    for chunk in payload.iter() {
        let mut rest: &[u8] = chunk;
        while !rest.is_empty() {
            let n = rest.len().min(cap - filled);
            window[filled..filled + n].copy_from_slice(&rest[..n]);
            filled += n;
            rest = &rest[n..];
            if filled == cap {
                file.write_all_at(&window[..cap], offset)?;
                offset += cap as u64;
                filled = 0;
            }
        }
    }
    if filled > 0 {
        let padded = filled.div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN;
        window[filled..padded].fill(0);
        file.write_all_at(&window[..padded], offset)?;
        if padded != filled {
            file.set_len(offset + filled as u64)?;
        }
    }
    Ok(())
}

fn write_buffered(mut file: &File, payload: &PutPayload) -> io::Result<()> {
    for chunk in payload.iter() {
        file.write_all(chunk)?;
    }
    Ok(())
}

/// After a delete: removes the object's time-bucket directory if it is
/// empty and at least two buckets old (no writer creates files there any
/// more; one that still does recreates it). Never the agent's directory.
fn remove_old_bucket(root: &FsPath, location: &Path) {
    let mut parts: Vec<_> = location.parts().collect();
    parts.pop(); // the file
    let Some(bucket) = parts.last().and_then(|b| b.as_ref().parse::<u128>().ok()) else {
        return;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    if bucket + 2 > now / crate::OBJECT_DIR_SPAN_MS {
        return;
    }
    let dir = parts
        .iter()
        .fold(root.to_path_buf(), |d, p| d.join(p.as_ref()));
    // Fails (not empty) unless this was the bucket's last object.
    let _ = std::fs::remove_dir(dir);
}

fn sync_dir(dir: &FsPath) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Directory syncs for new object files, run by one thread
/// ("objects-dirsync"). An upload asks for its directory to be synced right
/// after creating its file, writes and syncs its data meanwhile, then waits
/// for the answer: the directory sync is off the upload's critical path
/// unless it is slower than the data write, and uploads in flight together
/// share one sync of their directory (a round). Correct because a round
/// starts after every request in it was made, so after every create.
struct DirSyncs {
    /// The round being filled; the thread takes it when it is free.
    next: Mutex<DirSyncState>,
    wake: std::sync::Condvar,
}

impl fmt::Debug for DirSyncs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DirSyncs")
    }
}

#[derive(Default)]
struct DirSyncState {
    round: Option<Arc<DirSyncRound>>,
    closed: bool,
}

/// One round: the directories to sync, then its outcome.
#[derive(Default)]
struct DirSyncRound {
    dirs: Mutex<Vec<PathBuf>>,
    /// `Some` once the round ran; an error fails every upload in it.
    outcome: Mutex<Option<Result<(), (io::ErrorKind, String)>>>,
    done: std::sync::Condvar,
}

/// A requested directory sync; `wait` blocks until it ran.
struct DirSyncTicket(Arc<DirSyncRound>);

impl DirSyncs {
    fn start() -> io::Result<Arc<DirSyncs>> {
        let syncs = Arc::new(DirSyncs {
            next: Mutex::new(DirSyncState::default()),
            wake: std::sync::Condvar::new(),
        });
        let worker = syncs.clone();
        std::thread::Builder::new()
            .name("objects-dirsync".into())
            .spawn(move || worker.run())?;
        Ok(syncs)
    }

    /// Called after the file in `dir` was created.
    fn request(&self, dir: &FsPath) -> DirSyncTicket {
        let mut next = self.next.lock().expect("dir syncs lock");
        let round = next.round.get_or_insert_with(Default::default).clone();
        // Added under the state lock: the thread takes a round's directories
        // only after taking the round under the same lock.
        {
            let mut dirs = round.dirs.lock().expect("dir sync round lock");
            if !dirs.iter().any(|d| d == dir) {
                dirs.push(dir.to_owned());
            }
        }
        drop(next);
        self.wake.notify_one();
        DirSyncTicket(round)
    }

    fn run(&self) {
        loop {
            let round = {
                let mut next = self.next.lock().expect("dir syncs lock");
                loop {
                    if let Some(r) = next.round.take() {
                        break r;
                    }
                    if next.closed {
                        return;
                    }
                    next = self.wake.wait(next).expect("dir syncs lock");
                }
            };
            let dirs = std::mem::take(&mut *round.dirs.lock().expect("dir sync round lock"));
            let outcome = dirs.iter().try_for_each(|d| {
                sync_dir(d).map_err(|e| (e.kind(), format!("syncing {}: {e}", d.display())))
            });
            *round.outcome.lock().expect("dir sync round lock") = Some(outcome);
            round.done.notify_all();
        }
    }

    fn close(&self) {
        self.next.lock().expect("dir syncs lock").closed = true;
        self.wake.notify_one();
    }
}

impl DirSyncTicket {
    fn wait(self) -> io::Result<()> {
        let mut outcome = self.0.outcome.lock().expect("dir sync round lock");
        loop {
            if let Some(o) = outcome.as_ref() {
                return o.clone().map_err(|(kind, msg)| io::Error::new(kind, msg));
            }
            outcome = self.0.done.wait(outcome).expect("dir sync round lock");
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.dir_syncs.close();
        if let Some(spares) = &self.spares {
            spares.close();
        }
    }
}

/// Unnamed files (`O_TMPFILE`) in the store's root, made ahead of uploads by
/// one thread ("objects-spare") and kept up to [`SPARE_FILES_MAX`]: an upload
/// takes one and links it at the object's name, then writes into it as into
/// a file it created, so the filesystem's inode allocation is not on the
/// produce path. On the development VM (ext4 without a journal, which skips
/// inodes freed in the last seconds) creating a file took 0.25-1.2 ms of
/// kernel time under load, as long as the data write and the syncs together
/// (benches/results/2026-12-07-ack-path/). An unnamed file that is never
/// linked (the agent stops) is freed when it is closed, or after a crash at
/// the next mount (journaled filesystems) or by fsck (ext4 without a
/// journal); nothing of it is ever visible in the store. One that cannot be
/// linked where an upload needs it turns the spares off.
struct Spares {
    state: Mutex<SparesState>,
    /// Signalled when a file is taken, and on close.
    wake: std::sync::Condvar,
}

impl fmt::Debug for Spares {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Spares")
    }
}

#[derive(Default)]
struct SparesState {
    files: Vec<File>,
    closed: bool,
}

impl Spares {
    /// Starts the thread, or `None` (logged) when `root`'s filesystem cannot
    /// make an unnamed file or link one: then each upload creates its file.
    fn start(root: &FsPath, direct: bool) -> Option<Arc<Spares>> {
        let probe = root.join(format!(".spare-probe-{}", uuid::Uuid::new_v4().simple()));
        let linked = make_unnamed(root, direct).and_then(|f| link_unnamed(&f, &probe));
        let _ = std::fs::remove_file(&probe);
        if let Err(e) = linked {
            tracing::info!(root = %root.display(), error = %e, "no unnamed files made ahead of uploads: each upload creates its file");
            return None;
        }
        let spares = Spares::holding(Vec::new());
        let (worker, root) = (spares.clone(), root.to_owned());
        match std::thread::Builder::new()
            .name("objects-spare".into())
            .spawn(move || worker.run(&root, direct))
        {
            Ok(_) => Some(spares),
            Err(e) => {
                tracing::warn!(error = %e, "no thread for unnamed files ahead of uploads: each upload creates its file");
                None
            }
        }
    }

    /// A spare file, if one is ready (none once closed).
    fn take(&self) -> Option<File> {
        let file = self.state.lock().expect("spares lock").files.pop();
        if file.is_some() {
            self.wake.notify_one();
        }
        file
    }

    /// Spares holding `files`, with no thread making more yet (`start`
    /// starts one; tests use a fixed set).
    fn holding(files: Vec<File>) -> Arc<Spares> {
        Arc::new(Spares {
            state: Mutex::new(SparesState {
                files,
                closed: false,
            }),
            wake: std::sync::Condvar::new(),
        })
    }

    fn run(&self, root: &FsPath, direct: bool) {
        let mut failing = false;
        loop {
            {
                let mut st = self.state.lock().expect("spares lock");
                while st.files.len() >= SPARE_FILES_MAX && !st.closed {
                    st = self.wake.wait(st).expect("spares lock");
                }
                if st.closed {
                    return;
                }
            }
            // Made outside the lock: this is the slow part.
            match make_unnamed(root, direct) {
                Ok(f) => {
                    failing = false;
                    self.state.lock().expect("spares lock").files.push(f);
                }
                Err(e) => {
                    if !failing {
                        tracing::warn!(root = %root.display(), error = %e, "making a spare file for uploads failed; uploads create their files meanwhile");
                    }
                    failing = true;
                    // Tried again on the next take, or in a second.
                    let st = self.state.lock().expect("spares lock");
                    if !st.closed {
                        let _ = self
                            .wake
                            .wait_timeout(st, std::time::Duration::from_secs(1));
                    }
                }
            }
        }
    }

    fn close(&self) {
        let mut st = self.state.lock().expect("spares lock");
        st.closed = true;
        st.files.clear();
        drop(st);
        self.wake.notify_all();
    }

    #[cfg(test)]
    fn ready(&self) -> usize {
        self.state.lock().expect("spares lock").files.len()
    }
}

/// An unnamed file in `dir` (`O_TMPFILE`), opened for writing like
/// [`create_new`]'s.
fn make_unnamed(dir: &FsPath, direct: bool) -> io::Result<File> {
    let mut o = OpenOptions::new();
    o.write(true);
    o.custom_flags(libc::O_TMPFILE | if direct { libc::O_DIRECT } else { 0 });
    o.open(dir)
}

/// Gives the unnamed `file` the name `path` (`linkat` through its
/// `/proc/self/fd` link, which needs no privilege). Fails with
/// `AlreadyExists` when `path` exists.
fn link_unnamed(file: &File, path: &FsPath) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd_path = format!("/proc/self/fd/{}", file.as_raw_fd());
    nix::unistd::linkat(
        nix::fcntl::AT_FDCWD,
        fd_path.as_str(),
        nix::fcntl::AT_FDCWD,
        path,
        nix::fcntl::AtFlags::AT_SYMLINK_FOLLOW,
    )
    .map_err(io::Error::from)
}

/// Creates `dir` and any missing parents below `root`, syncing each parent
/// whose entries changed so the new directories survive a crash.
fn create_dirs_synced(dir: &FsPath, root: &FsPath) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if dir == root {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("object directory {} is gone", root.display()),
        ));
    }
    let parent = dir.parent().unwrap_or(root);
    create_dirs_synced(parent, root)?;
    match std::fs::create_dir(dir) {
        Ok(()) => sync_dir(parent),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// What a GET reports about the file it read.
struct FileMeta {
    size: u64,
    modified: std::time::SystemTime,
    e_tag: String,
}

impl FileMeta {
    fn of(file: &File) -> io::Result<FileMeta> {
        let m = file.metadata()?;
        let modified = m.modified()?;
        let micros = modified
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_micros();
        Ok(FileMeta {
            size: m.len(),
            modified,
            // The same scheme as LocalFileSystem's, so both halves agree.
            e_tag: format!("\"{:x}-{micros:x}-{:x}\"", m.ino(), m.len()),
        })
    }
}

fn etag(file: &File) -> Option<String> {
    FileMeta::of(file).ok().map(|m| m.e_tag)
}

/// What [`read_direct`] read: the chunks, the range they hold, the file's
/// metadata.
type DirectRead = (Vec<Bytes>, Range<u64>, FileMeta);

/// Reads `range` (its end clamped to the file's size) of `path` with
/// `O_DIRECT` and hands out the wanted part without a copy, as chunks: one
/// per read block it spans from its aligned start, the last piece in a
/// buffer of its own size ([`ReadPool`]). The bytes skip the page cache,
/// which the store's own read cache replaces. `Ok(None)`: a range this path
/// does not answer (starting past the end, or `O_DIRECT` refused).
fn read_direct(
    path: &FsPath,
    range: Range<u64>,
    pool: Arc<ReadPool>,
) -> io::Result<Option<DirectRead>> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = FileMeta::of(&file)?;
    let end = range.end.min(meta.size);
    // Nothing at or past the end, but for the empty read of an empty file.
    if range.start >= end && (meta.size > 0 || range.start > 0) {
        return Ok(None);
    }
    let align = DIRECT_ALIGN as u64;
    let from = range.start / align * align;
    let to = end.div_ceil(align) * align;
    let block = READ_BLOCK_BYTES as u64;
    let mut chunks = Vec::with_capacity((to - from).div_ceil(block).max(1) as usize);
    let mut piece_from = from;
    loop {
        let piece_to = (piece_from + block).min(to);
        let mut lent = pool.take((piece_to - piece_from) as usize + DIRECT_ALIGN);
        let at = aligned_start(&lent.buf);
        let want = end.min(piece_to) - piece_from;
        read_aligned(
            &file,
            path,
            &mut lent.buf[at..at + (piece_to - piece_from) as usize],
            piece_from,
            want,
            end,
        )?;
        // Only the first piece starts before the range (by less than the
        // alignment).
        let skip = at + range.start.saturating_sub(piece_from) as usize;
        chunks.push(Bytes::from_owner(lent).slice(skip..at + want as usize));
        piece_from = piece_to;
        if piece_from >= end {
            break;
        }
    }
    Ok(Some((chunks, range.start..end, meta)))
}

/// Reads into `buf` (aligned, a multiple of the alignment long) from
/// offset `at` of `file` until at least `want` bytes are in. Reads stay
/// aligned: each full read returns whole blocks, and only the read that
/// meets the end of the file comes back short.
fn read_aligned(
    file: &File,
    path: &FsPath,
    buf: &mut [u8],
    at: u64,
    want: u64,
    end: u64,
) -> io::Result<()> {
    let mut got = 0usize;
    while (got as u64) < want {
        let n = file.read_at(&mut buf[got..], at + got as u64)?;
        if n == 0 {
            // The file shrank under us: objects never do.
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{} ended at {} of {end}", path.display(), at + got as u64),
            ));
        }
        got += n;
    }
    Ok(())
}

#[async_trait]
impl ObjectStore for FileStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let direct_ok =
            matches!(opts.mode, PutMode::Overwrite | PutMode::Create) && opts.attributes.is_empty();
        let Some(path) = self.file_of(location).filter(|_| direct_ok) else {
            return self.inner.put_opts(location, payload, opts).await;
        };
        let written = match tokio::runtime::Handle::current().runtime_flavor() {
            // On a multi-thread runtime (the storage thread's) the write
            // runs right here, with the worker handed over meanwhile.
            tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| self.writer.write_new(&path, &payload))
            }
            _ => {
                let (writer, file, payload) = (self.writer.clone(), path.clone(), payload.clone());
                tokio::task::spawn_blocking(move || writer.write_new(&file, &payload))
                    .await
                    .map_err(|e| generic(io::Error::other(e), &path))?
            }
        };
        match written {
            Ok(Some(file)) => Ok(PutResult {
                e_tag: etag(&file),
                version: None,
                extensions: Default::default(),
            }),
            Ok(None) if matches!(opts.mode, PutMode::Create) => {
                Err(object_store::Error::AlreadyExists {
                    path: location.to_string(),
                    source: "the object exists".into(),
                })
            }
            // Replacing an object: LocalFileSystem renames a staged copy
            // over it, atomically.
            Ok(None) => self.inner.put_opts(location, payload, opts).await,
            Err(e) => Err(generic(e, &path)),
        }
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let plain = self.writer.direct && !options.head && options.version.is_none();
        let range = match &options.range {
            None => Some(0..u64::MAX),
            Some(GetRange::Bounded(r)) => Some(r.clone()),
            Some(GetRange::Offset(o)) => Some(*o..u64::MAX),
            Some(GetRange::Suffix(_)) => None,
        };
        let (Some(path), Some(range), true) = (self.file_of(location), range, plain) else {
            return self.inner.get_opts(location, options).await;
        };
        let read = {
            let file = path.clone();
            let pool = self.read_pool.clone();
            tokio::task::spawn_blocking(move || read_direct(&file, range, pool))
                .await
                .map_err(|e| generic(io::Error::other(e), &path))?
        };
        let (chunks, range, meta) = match read {
            Ok(Some(r)) => r,
            // Past the end, or O_DIRECT refused: LocalFileSystem answers
            // (with its own error for a bad range).
            Ok(None) => return self.inner.get_opts(location, options).await,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(object_store::Error::NotFound {
                    path: location.to_string(),
                    source: e.into(),
                })
            }
            Err(e) => return Err(generic(e, &path)),
        };
        let meta = ObjectMeta {
            location: location.clone(),
            last_modified: chrono::DateTime::<chrono::Utc>::from(meta.modified),
            size: meta.size,
            e_tag: Some(meta.e_tag),
            version: None,
        };
        options.check_preconditions(&meta)?;
        Ok(GetResult {
            payload: GetResultPayload::Stream(
                futures::stream::iter(chunks.into_iter().map(Ok)).boxed(),
            ),
            meta,
            range,
            attributes: Default::default(),
            extensions: Default::default(),
        })
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let root = self.writer.root.clone();
        self.inner
            .delete_stream(locations)
            .inspect(move |r| {
                if let Ok(location) = r {
                    remove_old_bucket(&root, location);
                }
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::ObjectStoreExt;

    /// A large read buffer goes back to the pool when its last slice
    /// drops, and the next read of about its size gets it again; one much
    /// larger is not lent, small reads are not pooled, and the pool keeps
    /// its bound.
    #[test]
    fn read_buffers_are_reused_within_bounds() {
        let pool = Arc::new(ReadPool::new(0));
        let len = 2 * READ_BUFFER_POOLED_MIN_BYTES;
        let lent = pool.take(len);
        assert_eq!(lent.buf.len(), len);
        let addr = lent.buf.as_ptr();
        let bytes = Bytes::from_owner(lent);
        let slice = bytes.slice(10..20);
        drop(bytes);
        assert!(
            pool.buffers.lock().unwrap().is_empty(),
            "a slice still holds it"
        );
        drop(slice);
        assert_eq!(pool.buffers.lock().unwrap().len(), 1);
        let again = pool.take(len - len / (2 * READ_BUFFER_SLACK_DEN));
        assert_eq!(
            again.buf.as_ptr(),
            addr,
            "reused for a slightly shorter read"
        );
        drop(again);
        let half = pool.take(len / 2);
        assert_eq!(half.buf.len(), len / 2, "not lent for half its size");
        drop(half);
        assert_eq!(pool.buffers.lock().unwrap().len(), 2, "both kept");
        pool.give(vec![0; 100], false);
        assert_eq!(
            pool.buffers.lock().unwrap().len(),
            2,
            "small ones are not kept"
        );
        for _ in 0..READ_BUFFERS_KEPT_MAX + 5 {
            pool.give(vec![0; READ_BUFFER_POOLED_MIN_BYTES], false);
        }
        assert_eq!(pool.buffers.lock().unwrap().len(), READ_BUFFERS_KEPT_MAX);
        pool.give(vec![0; READ_BLOCK_BYTES + DIRECT_ALIGN], false);
        assert_eq!(pool.free_blocks(), 0, "a pool for no blocks keeps none");
    }

    /// A read shorter than a block, when no kept buffer fits it and its
    /// piece is at least READ_BLOCK_LENT_MIN_BYTES, gets a free block;
    /// blocks lent so count against the pool's bound until they are back.
    #[test]
    fn free_blocks_are_lent_to_shorter_reads_within_the_bound() {
        let pool = Arc::new(ReadPool::faulted_in(2 * READ_BLOCK_BYTES));
        let block = READ_BLOCK_BYTES + DIRECT_ALIGN;
        // Pieces of exactly the minimum, and one page less.
        let short = READ_BLOCK_LENT_MIN_BYTES + DIRECT_ALIGN;
        let shorter = READ_BLOCK_LENT_MIN_BYTES;
        pool.give(vec![0; short], false);
        let kept = pool.take(short);
        assert_eq!(kept.buf.len(), short, "a kept buffer that fits comes first");
        assert!(!kept.short_block);
        let below = pool.take(shorter);
        assert_eq!(below.buf.len(), shorter, "below the minimum: its own");
        let a = pool.take(short);
        let b = pool.take(short);
        assert_eq!((a.buf.len(), b.buf.len()), (block, block), "free blocks");
        assert!(a.short_block && b.short_block);
        let c = pool.take(short);
        assert_eq!(c.buf.len(), short, "none free: its own");
        // A whole-block read makes a new block, let go when it is back: the
        // two lent short count against the bound.
        let whole = pool.take(block);
        assert!(whole.buf.len() == block && !whole.short_block);
        drop(whole);
        assert_eq!(pool.free_blocks(), 0, "free + lent short: at the bound");
        drop((a, b));
        assert_eq!(pool.free_blocks(), 2);
        assert_eq!(pool.blocks.lock().unwrap().lent_short, 0);
        drop((kept, below, c));
    }

    /// Large reads come back as one chunk per pooled block (no copy), the
    /// last piece in a buffer of its own size; blocks made at start go back
    /// to the pool when their last slice drops and the pool keeps its
    /// bound.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn large_reads_come_back_in_pooled_blocks() {
        let d = temp_in(&std::env::temp_dir().to_string_lossy()).unwrap();
        let store = FileStore::new(&d)
            .unwrap()
            .with_read_blocks(4 * READ_BLOCK_BYTES, true);
        if !store.direct() {
            eprintln!("no O_DIRECT under {}: skipped", d.display());
            return;
        }
        assert_eq!(store.read_pool.free_blocks(), 4, "made at start");
        let n = 3 * READ_BLOCK_BYTES + READ_BLOCK_BYTES / 8;
        let (p, want) = payload(&[n]);
        let key = Path::from("objects/1/blocks.rtq");
        store.put(&key, p).await.unwrap();
        let get = |range: Range<u64>| {
            let store = &store;
            let key = &key;
            async move {
                let r = store
                    .get_opts(key, GetOptions::new().with_range(Some(range)))
                    .await
                    .unwrap();
                futures::TryStreamExt::try_collect::<Vec<Bytes>>(r.into_stream())
                    .await
                    .unwrap()
            }
        };
        let whole = get(0..n as u64).await;
        let lens: Vec<usize> = whole.iter().map(Bytes::len).collect();
        assert_eq!(
            lens,
            [
                READ_BLOCK_BYTES,
                READ_BLOCK_BYTES,
                READ_BLOCK_BYTES,
                READ_BLOCK_BYTES / 8
            ],
            "three blocks and a last piece of its own"
        );
        assert!(whole.concat() == want);
        assert_eq!(store.read_pool.free_blocks(), 1, "three lent");
        assert!(store.read_pool.buffers.lock().unwrap().is_empty());
        // An unaligned range: its first block starts before it (at 4096),
        // its last 4 KiB come in a buffer of their own.
        let (s, e) = (5000usize, READ_BLOCK_BYTES + 8000);
        let part = get(s as u64..e as u64).await;
        assert!(part.concat() == want[s..e]);
        let lens: Vec<usize> = part.iter().map(Bytes::len).collect();
        assert_eq!(
            lens,
            [
                READ_BLOCK_BYTES - (s - DIRECT_ALIGN),
                e - READ_BLOCK_BYTES - DIRECT_ALIGN
            ]
        );
        assert_eq!(store.read_pool.free_blocks(), 0);
        let held = part[0].slice(10..20);
        drop((whole, part));
        assert_eq!(
            store.read_pool.free_blocks(),
            3,
            "back when their last slice drops; a slice still holds one"
        );
        drop(held);
        assert_eq!(store.read_pool.free_blocks(), 4, "kept: the bound");
        store
            .read_pool
            .give(vec![0; READ_BLOCK_BYTES + DIRECT_ALIGN], false);
        assert_eq!(store.read_pool.free_blocks(), 4, "no more than the bound");
        // The last piece of the whole read (an eighth of a block) was kept,
        // and a read of about its size reuses it.
        assert_eq!(store.read_pool.buffers.lock().unwrap().len(), 1);
        let again = get(0..(READ_BLOCK_BYTES / 8 - 1000) as u64).await;
        assert!(again.concat() == want[..READ_BLOCK_BYTES / 8 - 1000]);
        assert!(store.read_pool.buffers.lock().unwrap().is_empty(), "reused");
        // A read of half a block (a span) that no kept buffer fits: a free
        // block, not fresh memory.
        let span = get(0..(READ_BLOCK_BYTES / 2) as u64).await;
        assert!(span.concat() == want[..READ_BLOCK_BYTES / 2]);
        assert_eq!(store.read_pool.free_blocks(), 3);
        drop(span);
        assert_eq!(store.read_pool.free_blocks(), 4);
        // An empty object: its empty read answers, a read past its end is
        // refused (by LocalFileSystem).
        let empty = Path::from("objects/1/empty.rtq");
        store.put(&empty, PutPayload::new()).await.unwrap();
        assert!(store.get_range(&empty, 0..0).await.unwrap().is_empty());
        for r in [10..20, 5000..6000] {
            assert!(store.get_range(&empty, r).await.is_err());
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    fn payload(sizes: &[usize]) -> (PutPayload, Vec<u8>) {
        let mut all = Vec::new();
        let chunks: Vec<Bytes> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let c: Vec<u8> = (0..n).map(|j| (i * 31 + j * 7) as u8).collect();
                all.extend_from_slice(&c);
                Bytes::from(c)
            })
            .collect();
        (chunks.into_iter().collect(), all)
    }

    async fn roundtrip(store: FileStore, dir: &FsPath) {
        let cases: &[&[usize]] = &[
            &[1],
            &[4096],
            &[4095, 1, 4097],
            &[100, 0, 300_000, 17],
            // Past one write buffer, ending unaligned.
            &[WRITE_BUFFER_BYTES - 3, 10, WRITE_BUFFER_BYTES + 5_000],
        ];
        for (i, sizes) in cases.iter().enumerate() {
            let (p, want) = payload(sizes);
            let key = Path::from(format!("objects/7/{i:03}-x.rtq"));
            let r = store.put(&key, p).await.unwrap();
            assert!(r.e_tag.is_some());
            let got = store.get(&key).await.unwrap();
            assert_eq!(got.meta.size, want.len() as u64, "case {i}");
            assert_eq!(got.meta.e_tag, r.e_tag, "case {i}");
            assert!(got.bytes().await.unwrap() == want, "case {i}");
            let n = want.len() as u64;
            for r in [0..1, n / 2..n, n / 3..n / 3 + 1, 1..n, 4095.min(n - 1)..n] {
                if r.start >= r.end {
                    continue;
                }
                let b = store.get_range(&key, r.clone()).await.unwrap();
                let (s, e) = (r.start as usize, r.end as usize);
                assert!(b == want[s..e], "case {i} range {r:?}");
            }
            // A range running past the end is cut at it, as LocalFileSystem does.
            let b = store.get_range(&key, n - 1..n + 10_000).await.unwrap();
            assert!(b == want[want.len() - 1..], "case {i}");
            assert!(store.get_range(&key, n + 1..n + 2).await.is_err());
            assert_eq!(
                std::fs::metadata(dir.join(key.as_ref())).unwrap().len(),
                want.len() as u64
            );
        }
        // Create on an existing key fails; Overwrite replaces it.
        let key = Path::from("objects/7/000-x.rtq");
        let (p, _) = payload(&[10]);
        let e = store
            .put_opts(&key, p, PutOptions::from(PutMode::Create))
            .await
            .unwrap_err();
        assert!(
            matches!(e, object_store::Error::AlreadyExists { .. }),
            "{e}"
        );
        let (p, want) = payload(&[5000]);
        store.put(&key, p).await.unwrap();
        assert!(store.get(&key).await.unwrap().bytes().await.unwrap() == want);
        let missing = store.get(&Path::from("objects/7/none.rtq")).await;
        assert!(matches!(missing, Err(object_store::Error::NotFound { .. })));
        // Keys LocalFileSystem would escape go to it.
        let odd = Path::from("objects/7/a b#c.rtq");
        let (p, want) = payload(&[33]);
        store.put(&odd, p).await.unwrap();
        assert!(store.get(&odd).await.unwrap().bytes().await.unwrap() == want);
        // Nothing but the objects is left behind (no probe, no staging).
        let listed: Vec<_> = futures::StreamExt::collect::<Vec<_>>(store.list(None)).await;
        assert_eq!(listed.len(), cases.len() + 1);
        let stray: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n != "objects")
            .collect();
        assert!(stray.is_empty(), "{stray:?}");
    }

    #[test]
    fn direct_writer_pads_then_cuts_back() {
        // The aligned-write logic on a plain file (no O_DIRECT needed).
        let d = temp_in(&std::env::temp_dir().to_string_lossy()).unwrap();
        for (i, sizes) in [
            &[1usize][..],
            &[8192],
            &[3, 9000, 12],
            &[WRITE_BUFFER_BYTES + 1],
        ]
        .iter()
        .enumerate()
        {
            let (p, want) = payload(sizes);
            let path = d.join(format!("{i}"));
            let f = create_new(&path, false).unwrap();
            let mut buf = vec![0u8; 3 * DIRECT_ALIGN + 100];
            write_direct(&f, &p, &mut buf).unwrap();
            assert!(std::fs::read(&path).unwrap() == want, "case {i}");
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    fn temp_in(parent: &str) -> Option<PathBuf> {
        let d = PathBuf::from(parent).join(format!("rutomq-fs-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&d).ok().map(|()| d)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn direct_writes_read_back_exactly() {
        let d = temp_in(&std::env::temp_dir().to_string_lossy()).unwrap();
        let store = FileStore::new(&d).unwrap();
        eprintln!("{store}");
        // Spare files made ahead, as the agent runs...
        if let Some(spares) = store.writer.spares.clone() {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while spares.ready() < SPARE_FILES_MAX && std::time::Instant::now() < deadline {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            assert_eq!(spares.ready(), SPARE_FILES_MAX);
        }
        roundtrip(store, &d).await;
        std::fs::remove_dir_all(&d).unwrap();
        // ... and each upload creating its file.
        let d = temp_in(&std::env::temp_dir().to_string_lossy()).unwrap();
        roundtrip(FileStore::new(&d).unwrap().with_spares(None), &d).await;
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// An upload links a spare file at its key, in a bucket made on the
    /// way, and writes into it; with none left it creates its file; a spare
    /// taken for a key that exists is dropped unnamed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn uploads_write_into_spare_files_and_name_them() {
        let d = temp_in(&std::env::temp_dir().to_string_lossy()).unwrap();
        let store = FileStore::new(&d).unwrap();
        let direct = store.direct();
        // The store has spares exactly where unnamed files can be made and named.
        let can = make_unnamed(&d, direct).and_then(|f| link_unnamed(&f, &d.join("can")));
        let _ = std::fs::remove_file(d.join("can"));
        assert_eq!(store.writer.spares.is_some(), can.is_ok(), "{can:?}");
        if can.is_err() {
            eprintln!("no O_TMPFILE under {}: nothing more to check", d.display());
            std::fs::remove_dir_all(&d).unwrap();
            return;
        }
        let made: Vec<File> = (0..3).map(|_| make_unnamed(&d, direct).unwrap()).collect();
        let spares = Spares::holding(made);
        let store = store.with_spares(Some(spares.clone()));
        let mut want = Vec::new();
        for i in 0..4 {
            let (p, body) = payload(&[5000 + i, 3]);
            let key = Path::from(format!("objects/8/b{i}/o.rtq"));
            store.put(&key, p).await.unwrap();
            assert_eq!(spares.ready(), 3usize.saturating_sub(i + 1), "upload {i}");
            want.push((key, body));
        }
        for (key, body) in &want {
            assert!(
                store.get(key).await.unwrap().bytes().await.unwrap() == *body,
                "{key}"
            );
            let meta = std::fs::metadata(d.join(key.as_ref())).unwrap();
            assert_eq!(meta.len(), body.len() as u64);
            assert_eq!(meta.nlink(), 1, "{key}");
        }
        let spares = Spares::holding(vec![make_unnamed(&d, direct).unwrap()]);
        let store = store.with_spares(Some(spares.clone()));
        let (p, _) = payload(&[10]);
        let e = store
            .put_opts(&want[0].0, p, PutOptions::from(PutMode::Create))
            .await
            .unwrap_err();
        assert!(
            matches!(e, object_store::Error::AlreadyExists { .. }),
            "{e}"
        );
        assert_eq!(spares.ready(), 0);
        assert!(store.get(&want[0].0).await.unwrap().bytes().await.unwrap() == want[0].1);
        let listed: Vec<_> = futures::StreamExt::collect::<Vec<_>>(store.list(None)).await;
        assert_eq!(listed.len(), want.len());
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A spare that cannot be named where the upload needs it (here: made
    /// on another filesystem, so `linkat` answers EXDEV) turns the spares
    /// off, and the upload creates its file instead.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_spare_that_cannot_be_named_turns_spares_off() {
        let d = temp_in(&std::env::temp_dir().to_string_lossy()).unwrap();
        let other = temp_in("/dev/shm");
        let foreign = other.as_ref().and_then(|o| make_unnamed(o, false).ok());
        let (Some(other), Some(foreign)) = (other, foreign) else {
            eprintln!("no unnamed file on /dev/shm: nothing to check");
            std::fs::remove_dir_all(&d).unwrap();
            return;
        };
        let spares = Spares::holding(vec![foreign]);
        let store = FileStore::new(&d)
            .unwrap()
            .with_spares(Some(spares.clone()));
        let (p, body) = payload(&[9000]);
        let key = Path::from("objects/3/x.rtq");
        store.put(&key, p).await.unwrap();
        assert!(store.get(&key).await.unwrap().bytes().await.unwrap() == body);
        assert!(spares.take().is_none(), "spares still handed out");
        assert!(spares.state.lock().unwrap().closed);
        std::fs::remove_dir_all(&d).unwrap();
        std::fs::remove_dir_all(&other).unwrap();
    }

    /// More uploads at once than write buffers: they wait for one, every
    /// object is whole, and no more buffers are ever made.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_uploads_share_the_bounded_buffers() {
        let d = temp_in(&std::env::temp_dir().to_string_lossy()).unwrap();
        let store = Arc::new(FileStore::new(&d).unwrap());
        if !store.direct() {
            eprintln!("no O_DIRECT under {}: nothing to check", d.display());
            std::fs::remove_dir_all(&d).unwrap();
            return;
        }
        let uploads = 3 * WRITE_BUFFERS_MAX;
        let puts = (0..uploads).map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                let body = vec![i as u8; WRITE_BUFFER_BYTES / 2 + i * 1000];
                let key = Path::from(format!("objects/1/c{i}.rtq"));
                store.put(&key, body.clone().into()).await.unwrap();
                (key, body)
            })
        });
        for done in futures::future::join_all(puts).await {
            let (key, body) = done.unwrap();
            let got = store.get(&key).await.unwrap().bytes().await.unwrap();
            assert!(got == body, "{key}");
        }
        let pool = store.writer.buffers.lock().unwrap();
        assert!(pool.made <= WRITE_BUFFERS_MAX, "{} buffers", pool.made);
        assert_eq!(pool.free.len(), pool.made, "every buffer came back");
        drop(pool);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn buffered_writes_read_back_exactly() {
        // Also the path taken off a multi-thread runtime.
        let d = temp_in(&std::env::temp_dir().to_string_lossy()).unwrap();
        let store = FileStore::buffered(&d).unwrap();
        assert!(!store.direct());
        roundtrip(store, &d).await;
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// Deleting an old bucket's last object removes the bucket directory;
    /// the current bucket stays (writers are creating files in it); a
    /// write into a bucket removed meanwhile recreates it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn old_empty_buckets_go_and_writes_recreate_them() {
        let d = temp_in(&std::env::temp_dir().to_string_lossy()).unwrap();
        let store = FileStore::buffered(&d).unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
            / crate::OBJECT_DIR_SPAN_MS;
        let old = Path::from(format!("objects/7/{:09}/a.rtq", now - 5));
        let current = Path::from(format!("objects/7/{now:09}/b.rtq"));
        for key in [&old, &current] {
            store.put(key, PutPayload::from_static(b"x")).await.unwrap();
        }
        store.delete(&old).await.unwrap();
        store.delete(&current).await.unwrap();
        let gone = d.join(format!("objects/7/{:09}", now - 5));
        assert!(
            !gone.exists(),
            "{:?}",
            std::fs::read_dir(&gone).map(|r| r.map(|e| e.unwrap().path()).collect::<Vec<_>>())
        );
        assert!(d.join(format!("objects/7/{now:09}")).is_dir());
        assert!(d.join("objects/7").is_dir(), "never the agent's directory");
        // The old bucket is gone; a late write there recreates it.
        store
            .put(&old, PutPayload::from_static(b"y"))
            .await
            .unwrap();
        assert_eq!(store.get(&old).await.unwrap().bytes().await.unwrap(), "y");
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// Every request is answered once a sync after it ran; a failed
    /// directory sync fails the uploads waiting on its round, and later
    /// rounds start clean.
    #[test]
    fn directory_syncs_answer_every_request_and_report_failures() {
        let d = std::env::temp_dir().join(format!("rq-dirsync-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(d.join("a")).unwrap();
        let syncs = DirSyncs::start().unwrap();
        let tickets: Vec<_> = (0..8).map(|_| syncs.request(&d.join("a"))).collect();
        for t in tickets {
            t.wait().unwrap();
        }
        let missing = syncs.request(&d.join("missing"));
        let err = missing.wait().unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
        assert!(err.to_string().contains("missing"), "{err}");
        syncs.request(&d.join("a")).wait().unwrap();
        syncs.close();
        std::fs::remove_dir_all(&d).unwrap();
    }
}
