//! `strand tune` and `strand iotune` as a user runs them, and iotune's sequential-write
//! measurement checked against fio on the same directory in the same run.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Mutex;

use strand_tuning::iotune::ring::{seq_write, SeqWrite};
use strand_tuning::IoProperties;

/// Tests that load the disk run one at a time, so they do not measure each other.
static DISK: Mutex<()> = Mutex::new(());

fn strand(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strand"))
        .args(args)
        .output()
        .expect("run strand")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A directory on the build disk (not a tmpfs /tmp, where O_DIRECT may not work).
fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir")
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn tune_prints_one_line_per_check() {
    let dir = scratch();
    let out = strand(&["tune", "--data-dir", path_str(dir.path())]);
    let stdout = text(&out.stdout);
    println!("{stdout}");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("check") && lines[0].contains("recommended"));
    for name in [
        "cpu governor",
        "transparent hugepages",
        "vm.swappiness",
        "fs.aio-max-nr",
        "fs.file-max",
        "ulimit -n",
        "io scheduler",
        "nomerges",
        "nic rps",
        "clocksource",
        "filesystem",
        "mount atime",
        "vm.dirty_ratio",
        "kernel.io_uring_disabled",
        "numa nodes",
    ] {
        let line = lines
            .iter()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no line for {name}"));
        assert!(
            [" ok ", " fix ", " n/a ", " unknown "]
                .iter()
                .any(|s| line.contains(s)),
            "{line}"
        );
    }
    assert!(stdout.contains(" checks: "), "summary line");
}

#[test]
fn tune_json_is_a_versioned_object() {
    let dir = scratch();
    let out = strand(&["tune", "--json", "--data-dir", path_str(dir.path())]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    assert_eq!(v["version"], 1);
    let checks = v["checks"].as_array().expect("checks");
    assert!(checks.len() >= 15, "{v}");
    for c in checks {
        for field in ["name", "current", "recommended", "why", "status"] {
            assert!(c[field].is_string(), "{field} in {c}");
        }
        assert!(c["applicable"].is_boolean(), "{c}");
        let status = c["status"].as_str().unwrap_or_default();
        assert!(
            ["ok", "fix", "not-applicable", "unknown"].contains(&status),
            "{c}"
        );
    }
}

#[test]
fn tune_apply_changes_a_sandboxed_tree() {
    let root = scratch();
    let vm = root.path().join("proc/sys/vm");
    std::fs::create_dir_all(&vm).expect("mkdir");
    std::fs::write(vm.join("swappiness"), "60\n").expect("write");
    let data = scratch();
    let out = strand(&[
        "tune",
        "--apply",
        "--root",
        path_str(root.path()),
        "--data-dir",
        path_str(data.path()),
    ]);
    let stdout = text(&out.stdout);
    println!("{stdout}");
    assert!(
        stdout.contains("apply vm.swappiness: changed: 60 -> 1"),
        "{stdout}"
    );
    let now = std::fs::read_to_string(vm.join("swappiness")).expect("read");
    assert_eq!(now.trim(), "1");
}

#[test]
fn iotune_quick_writes_the_io_properties_file() {
    let _disk = DISK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch();
    let out = strand(&["iotune", "--quick", "--data-dir", path_str(dir.path())]);
    println!("{}{}", text(&out.stderr), text(&out.stdout));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let file = dir.path().join("io-properties.toml");
    assert!(text(&out.stdout).contains(&format!("wrote {}", file.display())));
    let props = IoProperties::load(&file).expect("io-properties parse");
    assert!(props.sizes().clamped.is_empty(), "{props:?}");
    let measured = props.measured.expect("measurements recorded");
    assert_eq!(measured.seq_write.len(), 16);
    assert!(measured.peak_write_mb_per_s > 0.0);
    let left: Vec<_> = std::fs::read_dir(dir.path()).expect("ls").collect();
    assert_eq!(left.len(), 1, "scratch files left behind: {left:?}");
}

/// fio's sequential write (bytes/s -> MB/s), or `None` if this engine does not work here.
fn fio_seq_write(file: &Path, engine: &str) -> Option<f64> {
    let out = Command::new("fio")
        .args([
            "--name=seq",
            &format!("--filename={}", file.display()),
            "--rw=write",
            "--bs=1M",
            "--iodepth=8",
            "--direct=1",
            &format!("--ioengine={engine}"),
            "--size=1G",
            "--output-format=json",
        ])
        .output()
        .ok()?;
    let _ = std::fs::remove_file(file);
    if !out.status.success() {
        eprintln!("fio --ioengine={engine} failed: {}", text(&out.stderr));
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    Some(v["jobs"][0]["write"]["bw_bytes"].as_f64()? / 1e6)
}

/// iotune's 1 MiB x QD8 measurement, set up as fio sets up its job: a fresh 1 GiB file laid
/// out with fallocate, written once from the start, no fsync at the end.
fn iotune_seq_write(file: &Path) -> f64 {
    let job = SeqWrite {
        block_bytes: 1 << 20,
        queue_depth: 8,
        file_bytes: 1 << 30,
        time_limit: None,
    };
    let t = seq_write(file, &job).expect("iotune seq write");
    std::fs::remove_file(file).expect("rm");
    t.mb_per_s()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn iotune_sequential_write_is_within_20_percent_of_fio() {
    if Command::new("fio").arg("--version").output().is_err() {
        println!("skipped: fio not installed");
        return;
    }
    let _disk = DISK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch();
    let fio_file = dir.path().join("fio.dat");
    let ours_file = dir.path().join("iotune.dat");
    let mut engine = "io_uring";
    if fio_seq_write(&fio_file, engine).is_none() {
        engine = "libaio";
    }
    let mut ratio = 0.0;
    // Three tries: this VM's disk swings ±30% between 1 GiB runs (seen: 1280-2613 MB/s for
    // fio alone), so two tries still failed now and then on a noisy neighbour.
    for attempt in 1..=3 {
        // Five interleaved pairs, alternating which goes first, so the (virtual) disk's drift
        // hits both tools alike; the medians are compared.
        let (mut fio, mut ours) = (Vec::new(), Vec::new());
        for pair in 0..5 {
            if pair % 2 == 1 {
                ours.push(iotune_seq_write(&ours_file));
            }
            fio.push(fio_seq_write(&fio_file, engine).expect("fio ran before"));
            if pair % 2 == 0 {
                ours.push(iotune_seq_write(&ours_file));
            }
        }
        let (f, o) = (median(fio.clone()), median(ours.clone()));
        ratio = o / f;
        println!(
            "try {attempt}: seq write 1 MiB x QD8, 1 GiB, O_DIRECT: fio ({engine}) {f:.0} MB/s \
             {fio:.0?}, iotune {o:.0} MB/s {ours:.0?}, iotune/fio {ratio:.3}"
        );
        if (ratio - 1.0).abs() <= 0.20 {
            break;
        }
    }
    assert!(
        (ratio - 1.0).abs() <= 0.20,
        "iotune/fio = {ratio:.3}, outside 1 +- 0.20 three times"
    );
}
