//! This node's identity on disk: its host id, the cluster it belongs to, which directories are
//! its own, and its gossip generation.
//!
//! The host id, the tokens and the gossip generation live in storage's metadata (the data
//! directory's RocksDB). So that no directory is used by a node it does not belong to, the data
//! directory and the commit log directory each also hold an identity file, read before storage
//! opens (a commit log replayed into another node's data would mix two nodes' writes):
//!
//! `helenus-node.json`: one JSON object, UTF-8, `{"host_id": "<uuid>", "cluster_name":
//! "<name>"}`; written once (to a temporary name, synced, renamed, directory synced), the data
//! directory's before the commit log directory's, so a commit log directory that names a node
//! always belongs with a data directory that does.
//!
//! Start-up refuses, before storage opens: a configured `cluster_name` other than the one the
//! data directory records (Cassandra's "Saved cluster name X != configured name Y"), and a data
//! directory and commit log directory of different nodes; after it opens: a data directory whose
//! file names another node than its storage does.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use uuid::Uuid;

/// The identity file's name, in the data directory and in the commit log directory.
pub const IDENTITY_FILE_NAME: &str = "helenus-node.json";

/// Where node identity lives in storage's meta space.
const HOST_ID_KEY: &[u8] = b"local/host_id";
const GOSSIP_GENERATION_KEY: &[u8] = b"local/gossip_generation";

/// Storage's node metadata, as identity needs it (the node implements it over
/// `StorageEngine::get_meta`/`put_meta`; tests over a map).
pub trait MetaStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()>;
}

/// What an identity file records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub host_id: Uuid,
    pub cluster_name: String,
}

/// The node's directories, as the configuration names them.
#[derive(Debug, Clone)]
pub struct Directories {
    pub data: PathBuf,
    pub commit_log: PathBuf,
}

/// This start's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    pub host_id: Uuid,
    /// Seconds since the epoch at this start, or one more than the last start's if the clock
    /// is behind it (Cassandra's `incrementAndGetGeneration`): a peer takes a higher generation
    /// for a restart.
    pub gossip_generation: i32,
}

/// Before storage opens: the node the data directory records, after checking that the
/// configured cluster name is the recorded one and that the commit log directory belongs to
/// the same node. `None` for a data directory that records none (a first start, or one made
/// before Helenus kept identity files).
pub fn check_directories(dirs: &Directories, cluster_name: &str) -> Result<Option<Owner>> {
    let data = read_owner(&dirs.data)?;
    let commit_log = read_owner(&dirs.commit_log)?;
    if let Some(data) = &data {
        if data.cluster_name != cluster_name {
            bail!(
                "Saved cluster name {} != configured name {cluster_name}",
                data.cluster_name
            );
        }
    }
    match (&data, &commit_log) {
        (Some(data), Some(log)) if data.host_id != log.host_id => bail!(
            "the commit log directory {} belongs to node {} but the data directory {} belongs to \
             node {}: were directories swapped between nodes? The node does not start, so that \
             one node's commit log is not replayed into another's data; give it its own \
             directories",
            dirs.commit_log.display(),
            log.host_id,
            dirs.data.display(),
            data.host_id
        ),
        (None, Some(log)) => bail!(
            "the commit log directory {} belongs to node {} but the data directory {} records no \
             node: the node does not start, so that another node's commit log is not replayed \
             into this data; give it its own commit log directory",
            dirs.commit_log.display(),
            log.host_id,
            dirs.data.display()
        ),
        _ => {}
    }
    Ok(data)
}

/// After storage opens: this node's host id (created at its first start) and gossip
/// generation, checked against what the data directory's file recorded (`recorded`, from
/// [`check_directories`]); writes the identity files the directories lack.
pub fn establish(
    meta: &dyn MetaStore,
    dirs: &Directories,
    cluster_name: &str,
    recorded: Option<&Owner>,
    now_seconds: i64,
) -> Result<Identity> {
    let host_id = match meta.get(HOST_ID_KEY)? {
        Some(bytes) => Uuid::from_slice(&bytes).context("corrupt stored host id")?,
        None => {
            let id = Uuid::new_v4();
            meta.put(HOST_ID_KEY, id.as_bytes())?;
            id
        }
    };
    if let Some(recorded) = recorded {
        if recorded.host_id != host_id {
            bail!(
                "the data directory {} records node {} but its data is node {}'s: its identity \
                 file ({IDENTITY_FILE_NAME}) was changed or copied from another node",
                dirs.data.display(),
                recorded.host_id,
                host_id
            );
        }
    }
    let owner = Owner {
        host_id,
        cluster_name: cluster_name.to_string(),
    };
    // The data directory's first: see the module's comment.
    for dir in [&dirs.data, &dirs.commit_log] {
        if read_owner(dir)?.is_none() {
            write_owner(dir, &owner)?;
        }
    }
    let gossip_generation = next_gossip_generation(meta, now_seconds)?;
    Ok(Identity {
        host_id,
        gossip_generation,
    })
}

/// Cassandra's `incrementAndGetGeneration`: the clock's seconds, unless a start already took
/// as many, then one more; stored (4 bytes, big-endian) before it is used.
fn next_gossip_generation(meta: &dyn MetaStore, now_seconds: i64) -> Result<i32> {
    let now = i32::try_from(now_seconds.max(1)).unwrap_or(i32::MAX);
    let generation = match meta.get(GOSSIP_GENERATION_KEY)? {
        Some(bytes) => {
            let stored = i32::from_be_bytes(
                bytes
                    .as_slice()
                    .try_into()
                    .map_err(|_| anyhow!("corrupt stored gossip generation"))?,
            );
            let next = stored.saturating_add(1);
            if next >= now {
                tracing::warn!(
                    "Using stored Gossip Generation {next} as it is greater than current system \
                     time {now}"
                );
                next
            } else {
                now
            }
        }
        None => now,
    };
    meta.put(GOSSIP_GENERATION_KEY, &generation.to_be_bytes())?;
    Ok(generation)
}

/// The owner `dir`'s identity file records; `None` if the directory or the file does not exist.
pub fn read_owner(dir: &Path) -> Result<Option<Owner>> {
    let path = dir.join(IDENTITY_FILE_NAME);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let damaged = || format!("damaged node identity file {}", path.display());
    let value: serde_json::Value = serde_json::from_str(&text).with_context(damaged)?;
    let host_id = value
        .get("host_id")
        .and_then(serde_json::Value::as_str)
        .and_then(|s| Uuid::parse_str(s).ok())
        .ok_or_else(|| anyhow!("{}: no valid host_id", damaged()))?;
    let cluster_name = value
        .get("cluster_name")
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| anyhow!("{}: no cluster_name", damaged()))?
        .to_string();
    Ok(Some(Owner {
        host_id,
        cluster_name,
    }))
}

/// Writes `dir`'s identity file durably: a temporary file, synced, renamed over the name, and
/// the directory synced.
fn write_owner(dir: &Path, owner: &Owner) -> Result<()> {
    let text = serde_json::json!({
        "host_id": owner.host_id.to_string(),
        "cluster_name": owner.cluster_name,
    })
    .to_string();
    let path = dir.join(IDENTITY_FILE_NAME);
    let temporary = dir.join(format!("{IDENTITY_FILE_NAME}.tmp"));
    let write = || -> std::io::Result<()> {
        fs::create_dir_all(dir)?;
        let mut file = fs::File::create(&temporary)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        fs::rename(&temporary, &path)?;
        fs::File::open(dir)?.sync_all()
    };
    write().with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::collections::BTreeMap;

    use super::*;

    #[derive(Default)]
    struct Meta(RefCell<BTreeMap<Vec<u8>, Vec<u8>>>);

    impl MetaStore for Meta {
        fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
            Ok(self.0.borrow().get(key).cloned())
        }
        fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
            self.0.borrow_mut().insert(key.to_vec(), value.to_vec());
            Ok(())
        }
    }

    /// One node's directories under `root`.
    fn dirs(root: &Path, node: &str) -> Directories {
        Directories {
            data: root.join(node).join("data"),
            commit_log: root.join(node).join("commitlog"),
        }
    }

    /// A start: the checks, then what happens once storage is open.
    fn start(meta: &Meta, dirs: &Directories, cluster: &str, now: i64) -> Result<Identity> {
        let recorded = check_directories(dirs, cluster)?;
        establish(meta, dirs, cluster, recorded.as_ref(), now)
    }

    #[test]
    fn a_first_start_records_the_node_in_both_directories() {
        let root = tempfile::tempdir().expect("tempdir");
        let a = dirs(root.path(), "a");
        let meta = Meta::default();
        let first = start(&meta, &a, "Prod", 1_000).expect("first start");
        let owner = Owner {
            host_id: first.host_id,
            cluster_name: "Prod".to_string(),
        };
        assert_eq!(read_owner(&a.data).expect("read"), Some(owner.clone()));
        assert_eq!(read_owner(&a.commit_log).expect("read"), Some(owner));
        assert!(!a.data.join(format!("{IDENTITY_FILE_NAME}.tmp")).exists());
        let again = start(&meta, &a, "Prod", 2_000).expect("restart");
        assert_eq!(again.host_id, first.host_id);
    }

    #[test]
    fn another_cluster_name_is_refused_in_cassandras_words() {
        let root = tempfile::tempdir().expect("tempdir");
        let a = dirs(root.path(), "a");
        let meta = Meta::default();
        start(&meta, &a, "Prod", 1_000).expect("first start");
        let e = start(&meta, &a, "Test Cluster", 1_001).expect_err("renamed");
        assert_eq!(
            e.to_string(),
            "Saved cluster name Prod != configured name Test Cluster"
        );
    }

    #[test]
    fn directories_of_two_nodes_are_refused() {
        let root = tempfile::tempdir().expect("tempdir");
        let (a, b) = (dirs(root.path(), "a"), dirs(root.path(), "b"));
        let (meta_a, meta_b) = (Meta::default(), Meta::default());
        let id_a = start(&meta_a, &a, "Prod", 1_000).expect("a").host_id;
        let id_b = start(&meta_b, &b, "Prod", 1_000).expect("b").host_id;
        // Node a configured with b's data directory (the data directories swapped).
        let swapped = Directories {
            data: b.data.clone(),
            commit_log: a.commit_log.clone(),
        };
        let e = check_directories(&swapped, "Prod")
            .expect_err("swapped")
            .to_string();
        assert!(e.contains(&format!("belongs to node {id_a}")), "{e}");
        assert!(e.contains(&format!("belongs to node {id_b}")), "{e}");
        assert!(e.contains("were directories swapped between nodes?"), "{e}");
        // A new data directory with a's commit log.
        let fresh = Directories {
            data: root.path().join("new-data"),
            commit_log: a.commit_log.clone(),
        };
        let e = check_directories(&fresh, "Prod")
            .expect_err("fresh")
            .to_string();
        assert!(e.contains("records no node"), "{e}");
        // A new commit log directory is the node's own from now on.
        let new_log = Directories {
            data: a.data.clone(),
            commit_log: root.path().join("new-log"),
        };
        assert_eq!(
            start(&meta_a, &new_log, "Prod", 1_001)
                .expect("new log")
                .host_id,
            id_a
        );
        assert_eq!(
            read_owner(&new_log.commit_log)
                .expect("read")
                .map(|o| o.host_id),
            Some(id_a)
        );
        // A data directory whose file was copied from another node.
        let e = start(&meta_a, &b, "Prod", 1_002)
            .expect_err("file of b")
            .to_string();
        assert!(e.contains("was changed or copied from another node"), "{e}");
    }

    #[test]
    fn damaged_identity_files_are_errors() {
        let root = tempfile::tempdir().expect("tempdir");
        let a = dirs(root.path(), "a");
        fs::create_dir_all(&a.data).expect("mkdir");
        for text in [
            "{",
            "{\"host_id\": \"x\", \"cluster_name\": \"c\"}",
            "{\"host_id\": \"00000000-0000-0000-0000-000000000001\"}",
        ] {
            fs::write(a.data.join(IDENTITY_FILE_NAME), text).expect("write");
            let e = check_directories(&a, "c").expect_err(text);
            assert!(
                format!("{e:#}").contains("damaged node identity file"),
                "{text}: {e:#}"
            );
        }
    }

    #[test]
    fn the_gossip_generation_always_grows() {
        let meta = Meta::default();
        assert_eq!(next_gossip_generation(&meta, 1_000).expect("first"), 1_000);
        assert_eq!(next_gossip_generation(&meta, 2_000).expect("later"), 2_000);
        // A clock set back: one more than the last.
        assert_eq!(next_gossip_generation(&meta, 1_500).expect("behind"), 2_001);
        assert_eq!(
            next_gossip_generation(&meta, 2_001).expect("same second"),
            2_002
        );
    }
}
