//! `strand cluster certs`: a development CA and node certificates written to a directory.

use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use strand_cluster_core::transport::certs::DevCa;

/// Parses `1,2,3` into node ids (at least one, no duplicates).
fn node_ids(list: &str) -> io::Result<Vec<i32>> {
    let mut ids = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let id: i32 = part.parse().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("node id {part:?} is not a number"),
            )
        })?;
        if id < 0 || ids.contains(&id) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("node id {id} is negative or repeated"),
            ));
        }
        ids.push(id);
    }
    if ids.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "no node ids given",
        ));
    }
    Ok(ids)
}

/// Creates `path` with `text`; refuses to overwrite. Keys are readable by the owner only.
fn write_new(path: &Path, text: &str, private: bool) -> io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(if private { 0o600 } else { 0o644 })
        .open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}

/// Writes `ca.pem`, `ca.key` and `node-N.pem` / `node-N.key` for each id in `nodes` under
/// `out`; returns the paths written.
pub fn write_dev_certs(out: &Path, nodes: &str) -> io::Result<Vec<PathBuf>> {
    let ids = node_ids(nodes)?;
    std::fs::create_dir_all(out)?;
    let ca = DevCa::new("Strand development cluster CA")?;
    let mut files = vec![
        (out.join("ca.pem"), ca.cert_pem(), false),
        (out.join("ca.key"), ca.key_pem(), true),
    ];
    for id in ids {
        let creds = ca.issue(id)?;
        files.push((
            out.join(format!("node-{id}.pem")),
            creds.cert_chain_pem,
            false,
        ));
        files.push((out.join(format!("node-{id}.key")), creds.key_pem, true));
    }
    if let Some((p, _, _)) = files.iter().find(|(p, _, _)| p.exists()) {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} exists; choose an empty directory", p.display()),
        ));
    }
    for (path, text, private) in &files {
        write_new(path, text, *private)?;
    }
    Ok(files.into_iter().map(|(p, _, _)| p).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_lists_are_checked() {
        assert_eq!(node_ids("1, 2,3").unwrap(), vec![1, 2, 3]);
        for bad in ["", "1,x", "1,1", "-2"] {
            assert!(node_ids(bad).is_err(), "{bad:?} is refused");
        }
    }

    #[test]
    fn writes_loadable_credentials_once_and_keeps_keys_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("certs");
        let files = write_dev_certs(&out, "1,2").unwrap();
        assert_eq!(files.len(), 6);
        let read = |name: &str| std::fs::read_to_string(out.join(name)).unwrap();
        let creds = strand_cluster_core::transport::tls::NodeCredentials {
            ca_pem: read("ca.pem"),
            cert_chain_pem: read("node-2.pem"),
            key_pem: read("node-2.key"),
        };
        let t = strand_cluster_core::transport::Transport::new(2, &creds, None);
        assert!(t.is_ok(), "the files make a working transport");
        let mode = std::fs::metadata(out.join("node-1.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "keys are the owner's only");
        let again = write_dev_certs(&out, "1,2").unwrap_err();
        assert!(again.to_string().contains("exists"), "{again}");
    }
}
