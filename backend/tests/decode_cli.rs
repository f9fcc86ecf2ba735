//! Runs the built `vhost-device-spe decode` on golden and malformed files.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_vhost-device-spe");

/// One record of the known-good hardware bytes from record-format.md, then padding.
const GOLDEN: &[u8] = &[
    0xb0, 0xf4, 0xd3, 0x29, 0x10, 0x00, 0x80, 0xff, 0xa0, // PC
    0x49, 0x00, // LD
    0xb2, 0xc0, 0x3b, 0x29, 0x0f, 0x00, 0x00, 0xff, 0xff, // VA
    0x9a, 0x00, 0x00, // LAT 0 XLAT
    0x42, 0x16, // EV
    0x52, 0x16, 0x00, // EV, 2-byte form
    0x71, 0x36, 0x6c, 0x21, 0x2c, 0x09, 0x00, 0x00, 0x00, // TS
    0x00, 0x00, 0x00, // padding
];

fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
    let path = std::env::temp_dir().join(format!("spe-decode-{}-{name}", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    path
}

fn descriptions(stdout: &[u8]) -> Vec<(String, String)> {
    // ".  OFFSET:  RAW…  DESC": the description starts after the 16-byte raw column.
    String::from_utf8(stdout.to_vec())
        .unwrap()
        .lines()
        .map(|l| {
            assert!(l.starts_with(".  "), "{l:?}");
            (l[3..11].to_string(), l[13 + 16 * 3 + 1..].to_string())
        })
        .collect()
}

const GOLDEN_TEXT: &[(&str, &str)] = &[
    ("00000000", "PC 0xff80001029d3f4 el1 ns=1"),
    ("00000009", "LD GP-REG"),
    ("0000000b", "VA 0xffff00000f293bc0"),
    ("00000014", "LAT 0 XLAT"),
    ("00000017", "EV RETIRED L1D-ACCESS TLB-ACCESS"),
    ("00000019", "EV RETIRED L1D-ACCESS TLB-ACCESS"),
    ("0000001c", "TS 39395093558"),
    ("00000025", "PAD"),
];

fn expected() -> Vec<(String, String)> {
    GOLDEN_TEXT
        .iter()
        .map(|(o, d)| (o.to_string(), d.to_string()))
        .collect()
}

#[test]
fn decodes_golden_file() {
    let path = temp_file("golden.bin", GOLDEN);
    let out = Command::new(BIN).arg("decode").arg(&path).output().unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(descriptions(&out.stdout), expected());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with(".  00000000:  b0 f4 d3 29 10 00 80 ff a0    "),
        "{text}"
    );
}

#[test]
fn decodes_stdin() {
    let mut child = Command::new(BIN)
        .args(["decode", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(GOLDEN).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(descriptions(&out.stdout), expected());
}

#[test]
fn malformed_file_fails_with_offset() {
    // Good End, then a timestamp cut short at offset 3.
    let path = temp_file("bad.bin", &[0x01, 0x49, 0x00, 0x71, 0x01, 0x02]);
    let out = Command::new(BIN).arg("decode").arg(&path).output().unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.starts_with("error: malformed SPE stream at offset 3: truncated packet"),
        "{stderr}"
    );
    // Packets before the bad one are still printed.
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 2);
}

#[test]
fn unknown_header_fails_with_offset() {
    let path = temp_file("unknown.bin", &[0x49, 0x00, 0xff]);
    let out = Command::new(BIN).arg("decode").arg(&path).output().unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("malformed SPE stream at offset 2: unknown header byte 0xff"),
        "{stderr}"
    );
}

#[test]
fn missing_file_fails() {
    let out = Command::new(BIN)
        .args(["decode", "/nonexistent/spe.bin"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .starts_with("error: cannot read"));
}
