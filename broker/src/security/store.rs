//! The node's security state — SCRAM credentials and ACLs — and the file that keeps it,
//! `<data_dir>/security.json`, written whole (temporary file, fsync, rename, directory fsync)
//! on every change, so a change acknowledged to the client survives a crash.
//!
//! Readers never take a lock per request: the state is an immutable `Arc<SecurityState>`,
//! replaced whole on a change with a generation bump; each shard keeps its own copy in a
//! thread-local and takes the new one when the (atomic) generation moved.
//!
//! A salted credential is stored, never a password: the salt, iterations, StoredKey and
//! ServerKey of RFC 5802 (what Kafka keeps in its metadata log).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use serde::{Deserialize, Serialize};
use strand_wire::sasl::scram::{ScramCredential, ScramMechanism};

use super::acl::{AclBinding, Authorizer};

pub const FILE_NAME: &str = "security.json";

/// Credentials and ACLs as of one generation.
#[derive(Clone, Debug, Default)]
pub struct SecurityState {
    pub credentials: BTreeMap<(String, ScramMechanism), ScramCredential>,
    pub authorizer: Authorizer,
}

impl SecurityState {
    pub fn credential(&self, user: &str, m: ScramMechanism) -> Option<ScramCredential> {
        self.credentials.get(&(user.to_string(), m)).cloned()
    }
}

#[derive(Serialize, Deserialize)]
struct CredentialRecord {
    user: String,
    mechanism: String,
    iterations: u32,
    salt: String,
    stored_key: String,
    server_key: String,
}

#[derive(Serialize, Deserialize, Default)]
struct FileShape {
    #[serde(default)]
    scram: Vec<CredentialRecord>,
    #[serde(default)]
    acls: Vec<AclBinding>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

fn mechanism(name: &str) -> Option<ScramMechanism> {
    [ScramMechanism::Sha256, ScramMechanism::Sha512]
        .into_iter()
        .find(|m| m.name() == name)
}

/// Reads the file (absent: empty state) with the broker's authoriser settings.
pub fn load(
    dir: &Path,
    super_users: Vec<String>,
    allow_everyone_if_no_acl_found: bool,
) -> io::Result<SecurityState> {
    let path = dir.join(FILE_NAME);
    let mut state = SecurityState {
        credentials: BTreeMap::new(),
        authorizer: Authorizer::new(super_users, allow_everyone_if_no_acl_found),
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(state),
        Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    };
    let bad = |why: String| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {why}", path.display()),
        )
    };
    let file: FileShape = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    for r in file.scram {
        let m =
            mechanism(&r.mechanism).ok_or_else(|| bad(format!("mechanism {:?}", r.mechanism)))?;
        let field = |s: &str| unhex(s).ok_or_else(|| bad(format!("bad hex for user {:?}", r.user)));
        let credential = ScramCredential {
            mechanism: m,
            salt: field(&r.salt)?,
            iterations: r.iterations,
            stored_key: field(&r.stored_key)?,
            server_key: field(&r.server_key)?,
        };
        state.credentials.insert((r.user.clone(), m), credential);
    }
    for b in file.acls {
        state
            .authorizer
            .add(b)
            .map_err(|e| bad(format!("bad ACL: {}", e.message)))?;
    }
    Ok(state)
}

/// Writes the state durably (blocking: call from a blocking thread).
pub fn save(dir: &Path, state: &SecurityState) -> io::Result<()> {
    let file = FileShape {
        scram: state
            .credentials
            .iter()
            .map(|((user, m), c)| CredentialRecord {
                user: user.clone(),
                mechanism: m.name().to_string(),
                iterations: c.iterations,
                salt: hex(&c.salt),
                stored_key: hex(&c.stored_key),
                server_key: hex(&c.server_key),
            })
            .collect(),
        acls: state.authorizer.bindings().cloned().collect(),
    };
    let text = serde_json::to_string_pretty(&file).map_err(io::Error::other)?;
    let tmp = dir.join(format!("{FILE_NAME}.tmp"));
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, dir.join(FILE_NAME))?;
    crate::storage::recovery::sync_dir(dir)
}

/// The node's security state, shared by every shard.
pub struct SecurityStore {
    dir: PathBuf,
    current: RwLock<Arc<SecurityState>>,
    generation: AtomicU64,
    /// One change at a time (each reads, changes and saves the whole state).
    writing: Mutex<()>,
}

thread_local! {
    /// This shard's copy: (generation, state) — refreshed when the generation moves.
    static CACHED: RefCell<Option<(usize, u64, Arc<SecurityState>)>> = const { RefCell::new(None) };
}

impl SecurityStore {
    pub fn open(dir: &Path, super_users: Vec<String>, allow_everyone: bool) -> io::Result<Self> {
        let state = load(dir, super_users, allow_everyone)?;
        Ok(SecurityStore {
            dir: dir.to_path_buf(),
            current: RwLock::new(Arc::new(state)),
            generation: AtomicU64::new(1),
            writing: Mutex::new(()),
        })
    }

    /// The current state: one atomic load per call on the hot path.
    pub fn state(&self) -> Arc<SecurityState> {
        let me = self as *const SecurityStore as usize;
        let generation = self.generation.load(Ordering::Acquire);
        CACHED.with(|c| {
            let mut c = c.borrow_mut();
            if let Some((owner, g, state)) = c.as_ref() {
                if *owner == me && *g == generation {
                    return Arc::clone(state);
                }
            }
            let state = match self.current.read() {
                Ok(s) => Arc::clone(&s),
                Err(poisoned) => Arc::clone(&poisoned.into_inner()),
            };
            *c = Some((me, generation, Arc::clone(&state)));
            state
        })
    }

    /// Applies `change` to a copy of the state, saves it, then publishes it. Blocking (file
    /// I/O): run on a blocking thread. The change's own result comes back either way; the
    /// state is published only if it saved.
    pub fn update<T>(&self, change: impl FnOnce(&mut SecurityState) -> T) -> io::Result<T> {
        let _one = self
            .writing
            .lock()
            .map_err(|_| io::Error::other("security store poisoned"))?;
        let mut next = (*self.state_now()).clone();
        let out = change(&mut next);
        save(&self.dir, &next)?;
        match self.current.write() {
            Ok(mut c) => *c = Arc::new(next),
            Err(poisoned) => *poisoned.into_inner() = Arc::new(next),
        }
        self.generation.fetch_add(1, Ordering::AcqRel);
        Ok(out)
    }

    fn state_now(&self) -> Arc<SecurityState> {
        match self.current.read() {
            Ok(s) => Arc::clone(&s),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_and_acls_survive_a_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SecurityStore::open(dir.path(), vec![], false).expect("open");
        let cred = ScramCredential::from_password(ScramMechanism::Sha512, "pw", b"salt", 4096);
        let before = store.state();
        store
            .update(|s| {
                s.credentials
                    .insert(("alice".into(), ScramMechanism::Sha512), cred.clone());
            })
            .expect("update");
        assert!(before.credentials.is_empty(), "old snapshots do not change");
        assert_eq!(
            store.state().credential("alice", ScramMechanism::Sha512),
            Some(cred.clone())
        );
        let again = SecurityStore::open(dir.path(), vec![], false).expect("reopen");
        assert_eq!(
            again.state().credential("alice", ScramMechanism::Sha512),
            Some(cred)
        );
        assert_eq!(
            again.state().credential("alice", ScramMechanism::Sha256),
            None
        );
    }

    #[test]
    fn a_damaged_file_is_an_error_not_an_empty_state() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(FILE_NAME), "{ not json").expect("write");
        assert!(SecurityStore::open(dir.path(), vec![], false).is_err());
        assert_eq!(unhex("0aff"), Some(vec![10, 255]));
        assert_eq!(unhex("0a f"), None);
    }
}
