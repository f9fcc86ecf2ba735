//! The backend's `--record` folders (`records/vcpu<N>.rec`), as the replay
//! pair compares them: every record's bytes in order, without the host
//! time each frame also carries (it differs between any two runs). Read
//! here rather than through the backend, so that the harness judges the
//! backend's files from their documented format.

use std::fmt::Write as _;
use std::path::Path;

/// The first bytes of every record file (the backend's `record::MAGIC`).
const MAGIC: &[u8; 8] = b"SPEREC1\n";

/// How many bytes of a differing record a report shows.
const SHOWN: usize = 48;

/// The records of one vCPU's file, in order.
fn read(path: &Path) -> Result<Vec<Vec<u8>>, String> {
    let data = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut rest = data
        .strip_prefix(MAGIC)
        .ok_or_else(|| format!("{}: not a record file", path.display()))?;
    let mut records = Vec::new();
    // A frame: u64 host time, u16 length, the record's bytes.
    while !rest.is_empty() {
        let len = rest
            .get(8..10)
            .map(|b| usize::from(u16::from_le_bytes([b[0], b[1]])));
        let Some(record) = len.and_then(|n| rest.get(10..10 + n)) else {
            return Err(format!("{}: a frame cut short", path.display()));
        };
        records.push(record.to_vec());
        rest = &rest[10 + record.len()..];
    }
    Ok(records)
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::new();
    for b in bytes.iter().take(SHOWN) {
        let _ = write!(s, "{b:02x}");
    }
    if bytes.len() > SHOWN {
        s.push('…');
    }
    s
}

/// `None` when the two folders hold the same records for the same vCPUs;
/// otherwise where they first differ, for a reader to decode (`vhost-device-spe
/// decode` of the folders).
pub fn difference(a: &Path, b: &Path) -> Result<Option<String>, String> {
    let mut found = Vec::new();
    let mut vcpu = 0;
    loop {
        let name = format!("vcpu{vcpu}.rec");
        let (fa, fb) = (a.join(&name), b.join(&name));
        match (fa.exists(), fb.exists()) {
            (false, false) => break,
            (true, true) => {}
            (in_first, _) => {
                let run = if in_first { "first" } else { "second" };
                found.push(format!("{name} only in the {run} run"));
                break;
            }
        }
        let (ra, rb) = (read(&fa)?, read(&fb)?);
        let differing = ra.iter().zip(&rb).filter(|(x, y)| x != y).count();
        if let Some(i) = ra.iter().zip(&rb).position(|(x, y)| x != y) {
            found.push(format!(
                "vCPU {vcpu}: record {i} differs first ({differing} of {} differ): {} in the first run, {} in the second",
                ra.len().min(rb.len()),
                hex(&ra[i]),
                hex(&rb[i])
            ));
        } else if ra.len() != rb.len() {
            found.push(format!(
                "vCPU {vcpu}: {} records in the first run, {} in the second, the same up to there",
                ra.len(),
                rb.len()
            ));
        }
        vcpu += 1;
    }
    if vcpu == 0 {
        return Err(format!("no record files in {}", a.display()));
    }
    Ok((!found.is_empty()).then(|| found.join("; ")))
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// Writes `records` (one list per vCPU) as a `--record` folder would
    /// hold them, with host times that differ from folder to folder.
    pub fn write_folder(dir: &Path, records: &[&[&[u8]]], ns: u64) {
        std::fs::create_dir_all(dir).unwrap();
        for (v, list) in records.iter().enumerate() {
            let mut f = MAGIC.to_vec();
            for r in *list {
                f.extend_from_slice(&ns.to_le_bytes());
                f.extend_from_slice(&(r.len() as u16).to_le_bytes());
                f.extend_from_slice(r);
            }
            std::fs::write(dir.join(format!("vcpu{v}.rec")), f).unwrap();
        }
    }

    #[test]
    fn the_same_records_at_other_host_times_are_the_same() {
        let root = std::env::temp_dir().join(format!("xtask-records-{}", std::process::id()));
        let (a, b) = (root.join("a"), root.join("b"));
        let recs: &[&[&[u8]]] = &[&[b"\x01\x02", b"\x03"], &[b"\x04"]];
        write_folder(&a, recs, 5);
        write_folder(&b, recs, 99);
        assert_eq!(difference(&a, &b), Ok(None));

        write_folder(&b, &[&[b"\x01\x02", b"\x07"], &[b"\x04"]], 5);
        let d = difference(&a, &b).unwrap().unwrap();
        assert!(
            d.contains("vCPU 0: record 1 differs first (1 of 2 differ): 03 in the first run, 07"),
            "{d}"
        );

        write_folder(&b, &[&[b"\x01\x02", b"\x03", b"\x05"], &[b"\x04"]], 5);
        let d = difference(&a, &b).unwrap().unwrap();
        assert!(
            d.contains("2 records in the first run, 3 in the second"),
            "{d}"
        );

        write_folder(&b, &[&[b"\x01\x02", b"\x03"]], 5);
        std::fs::remove_file(b.join("vcpu1.rec")).unwrap();
        let d = difference(&a, &b).unwrap().unwrap();
        assert!(d.contains("vcpu1.rec only in the first run"), "{d}");

        std::fs::write(b.join("vcpu1.rec"), b"SPEREC1\n\0\0").unwrap();
        assert!(difference(&a, &b).unwrap_err().contains("cut short"));
        assert!(difference(&root.join("none"), &b)
            .unwrap_err()
            .contains("no record files"));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
