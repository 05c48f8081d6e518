//! The two file shapes the Raft state is kept in, both checksummed and crash-safe.
//!
//! A **value file** (the vote, the committed log id, the last purged log id, the state machine,
//! the snapshot) holds one value, replaced whole:
//!
//! ```text
//! [crc32 of body: u32 LE][body length: u32 LE][body: JSON]
//! ```
//!
//! written to `<name>.tmp`, fsynced, renamed over `<name>`, and the directory fsynced, so a
//! crash leaves the old value or the new one, never a mix. A value file whose checksum or
//! length is wrong is corruption (an error), not something to guess around.
//!
//! A **record file** (the log) is a sequence of records appended and fsynced:
//!
//! ```text
//! record := [body length: u32 LE][crc32 of body: u32 LE][body: JSON]
//! ```
//!
//! Reading stops at a torn last record (its header or body runs past the end, or the last
//! record's checksum fails): a crash during an append whose fsync had not returned, so never
//! acknowledged. A bad record followed by more is corruption.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;

/// Bound on one value or record body: the metadata log holds whole schemas, which are small
/// (a schema of thousands of tables is a few MB); anything larger is corruption.
pub(crate) const MAX_BODY_BYTES: usize = 256 << 20;

const HEADER_BYTES: usize = 8;

/// Runs `write`, one durable change to the files in `dir` (everything it writes is fsynced
/// when it returns Ok). Every change to the metadata directory goes through here, one at a
/// time per call, never nested: in tests the changes of the whole process are serialised and
/// each is followed by the crash-point hooks ([`crash_points`]), so a test sees the directory
/// as a crash between any two changes would leave it.
pub(crate) fn durable<R>(dir: &Path, write: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
    #[cfg(not(test))]
    {
        let _ = dir;
        write()
    }
    #[cfg(test)]
    {
        crash_points::around(dir, write)
    }
}

/// Replaces the value file `dir/name` with `value`, crash-safely.
pub(crate) fn write_value<T: Serialize>(dir: &Path, name: &str, value: &T) -> io::Result<()> {
    durable(dir, || write_value_now(dir, name, value))
}

fn write_value_now<T: Serialize>(dir: &Path, name: &str, value: &T) -> io::Result<()> {
    let body = serde_json::to_vec(value).map_err(io::Error::other)?;
    let mut bytes = Vec::with_capacity(HEADER_BYTES + body.len());
    bytes.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    bytes.extend_from_slice(&body_length(&body)?.to_le_bytes());
    bytes.extend_from_slice(&body);
    let tmp = dir.join(format!("{name}.tmp"));
    {
        let mut file = File::create(&tmp)?;
        file.write_all(&bytes)?;
        file.sync_all()?;
    }
    fs::rename(&tmp, dir.join(name))?;
    sync_dir(dir)
}

/// Reads the value file `dir/name`, `None` if there is none.
pub(crate) fn read_value<T: DeserializeOwned>(dir: &Path, name: &str) -> io::Result<Option<T>> {
    let path = dir.join(name);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let corrupt = |what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is corrupt: {what}", path.display()),
        )
    };
    if bytes.len() < HEADER_BYTES {
        return Err(corrupt("shorter than its header"));
    }
    let crc = u32::from_le_bytes(bytes[0..4].try_into().expect("4 bytes"));
    let length = u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes")) as usize;
    let body = &bytes[HEADER_BYTES..];
    if body.len() != length {
        return Err(corrupt("its length does not match its header"));
    }
    if crc32fast::hash(body) != crc {
        return Err(corrupt("checksum mismatch"));
    }
    serde_json::from_slice(body)
        .map(Some)
        .map_err(|e| corrupt(&e.to_string()))
}

/// Removes the value file `dir/name` if it exists.
pub(crate) fn remove_value(dir: &Path, name: &str) -> io::Result<()> {
    durable(dir, || match fs::remove_file(dir.join(name)) {
        Ok(()) => sync_dir(dir),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    })
}

/// Encodes one record (header and body) onto `out`.
pub(crate) fn encode_record<T: Serialize>(value: &T, out: &mut Vec<u8>) -> io::Result<()> {
    let body = serde_json::to_vec(value).map_err(io::Error::other)?;
    out.extend_from_slice(&body_length(&body)?.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    out.extend_from_slice(&body);
    Ok(())
}

/// The records of the record file at `path`, each with the byte offset it starts at, and the
/// length of the good prefix (where a torn last record begins, or the file's end). A missing
/// file has no records.
pub(crate) fn read_records<T: DeserializeOwned>(path: &Path) -> io::Result<(Vec<(u64, T)>, u64)> {
    let mut bytes = Vec::new();
    match File::open(path) {
        Ok(mut file) => {
            file.read_to_end(&mut bytes)?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => return Err(e),
    }
    let mut records = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let rest = &bytes[at..];
        if rest.len() < HEADER_BYTES {
            break; // a torn header
        }
        let length = u32::from_le_bytes(rest[0..4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(rest[4..8].try_into().expect("4 bytes"));
        if rest.len() < HEADER_BYTES + length {
            break; // a torn body
        }
        let body = &rest[HEADER_BYTES..HEADER_BYTES + length];
        let end = at + HEADER_BYTES + length;
        if crc32fast::hash(body) != crc {
            if end == bytes.len() {
                break; // the last record, torn in place
            }
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{} is corrupt: checksum mismatch in the record at byte {at}",
                    path.display()
                ),
            ));
        }
        let value = serde_json::from_slice(body).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is corrupt at byte {at}: {e}", path.display()),
            )
        })?;
        records.push((at as u64, value));
        at = end;
    }
    Ok((records, at as u64))
}

/// Opens the record file at `path` for appending, cut to `length` bytes (dropping a torn
/// tail) and synced. Not itself a [`durable`] change: the caller runs it inside one.
///
/// The file's cursor is wherever the OS leaves it (the start): a writer must place every
/// write itself ([`append_records`]), never rely on the cursor.
pub(crate) fn open_records(path: &Path, length: u64) -> io::Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)?;
    if file.metadata()?.len() != length {
        file.set_len(length)?;
        file.sync_all()?;
    }
    if let Some(dir) = path.parent() {
        sync_dir(dir)?;
    }
    Ok(file)
}

/// Writes `bytes` at byte `at` of the record file (its good length: a torn or failed tail
/// beyond is cut first) and syncs it, making the records they hold durable. Not itself a
/// [`durable`] change: the caller runs it inside one.
pub(crate) fn append_records(file: &mut File, at: u64, bytes: &[u8]) -> io::Result<()> {
    if file.metadata()?.len() != at {
        file.set_len(at)?;
    }
    file.seek(SeekFrom::Start(at))?;
    file.write_all(bytes)?;
    file.sync_data()
}

fn body_length(body: &[u8]) -> io::Result<u32> {
    if body.len() > MAX_BODY_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} bytes is more than a metadata record may hold",
                body.len()
            ),
        ));
    }
    Ok(u32::try_from(body.len()).expect("bounded by MAX_BODY_BYTES"))
}

/// Makes a rename or a created file in `dir` durable.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Crash points for tests: hooks called after every durable change ([`durable`]) to a
/// directory under a registered root, while no other change runs anywhere in the process, so
/// a hook that copies the directories sees exactly what a crash at that point would leave.
#[cfg(test)]
pub(crate) mod crash_points {
    use std::io;
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex, PoisonError};

    type Hook = Arc<dyn Fn() + Send + Sync>;

    /// Serialises every durable change of the process (tests run in parallel threads).
    static CHANGES: Mutex<()> = Mutex::new(());
    static HOOKS: Mutex<Vec<(u64, PathBuf, Hook)>> = Mutex::new(Vec::new());
    static NEXT_ID: AtomicU64 = AtomicU64::new(0);

    /// A registered hook; dropping it unregisters it.
    pub(crate) struct Registration(u64);

    impl Drop for Registration {
        fn drop(&mut self) {
            HOOKS
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .retain(|(id, _, _)| *id != self.0);
        }
    }

    /// Calls `hook` after every durable change to a directory under `root`. The hook must
    /// not write through [`super::durable`] (it runs inside one).
    pub(crate) fn register(root: &Path, hook: impl Fn() + Send + Sync + 'static) -> Registration {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        HOOKS.lock().unwrap_or_else(PoisonError::into_inner).push((
            id,
            root.to_path_buf(),
            Arc::new(hook),
        ));
        Registration(id)
    }

    pub(super) fn around<R>(dir: &Path, write: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
        let _serial = CHANGES.lock().unwrap_or_else(PoisonError::into_inner);
        let written = write();
        if written.is_ok() {
            let hooks: Vec<Hook> = HOOKS
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .filter(|(_, root, _)| dir.starts_with(root))
                .map(|(_, _, hook)| hook.clone())
                .collect();
            for hook in hooks {
                hook();
            }
        }
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_round_trips_and_a_flipped_byte_is_corruption() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        assert_eq!(read_value::<u64>(dir.path(), "v").expect("no file"), None);
        write_value(dir.path(), "v", &42u64).expect("written");
        assert_eq!(read_value::<u64>(dir.path(), "v").expect("read"), Some(42));
        let path = dir.path().join("v");
        let mut bytes = fs::read(&path).expect("read");
        *bytes.last_mut().expect("a body") ^= 1;
        fs::write(&path, bytes).expect("written");
        let error = read_value::<u64>(dir.path(), "v").expect_err("corrupt");
        assert!(error.to_string().contains("checksum mismatch"), "{error}");
    }

    #[test]
    fn a_torn_last_record_is_dropped_and_a_bad_middle_one_is_corruption() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("log");
        let mut bytes = Vec::new();
        for n in 0..3u64 {
            encode_record(&n, &mut bytes).expect("encoded");
        }
        let whole = bytes.len();
        fs::write(&path, &bytes[..whole - 1]).expect("written");
        let (records, good) = read_records::<u64>(&path).expect("read");
        assert_eq!(records.iter().map(|r| r.1).collect::<Vec<_>>(), vec![0, 1]);
        let file = open_records(&path, good).expect("opened");
        assert_eq!(file.metadata().expect("metadata").len(), good);

        bytes[HEADER_BYTES] ^= 0xff; // the first record's body
        fs::write(&path, &bytes).expect("written");
        let error = read_records::<u64>(&path).expect_err("corrupt");
        assert!(error.to_string().contains("record at byte 0"), "{error}");
    }
}
