//! Every register field of `spe_protocol::regs` against an independent
//! source: Linux's `arch/arm64/tools/sysreg` (the SPE registers as of the
//! FEAT_SPE_EFT/FDS additions, Linux 6.18), transcribed below in its own
//! syntax. The model's tests use the model's own constants, so a field at
//! the wrong position passed them (PMSFCR_EL1's masks sat at 28:24, not
//! 52:48, and a 7.3 guest's mask filters were ignored); this cannot.
//!
//! Fields Linux's file does not have come from the Arm ARM (DDI0487) or the
//! seeds; each is named in `NOT_IN_LINUX` with where it comes from.

use spe_protocol::regs::{self, Field};

const LINUX_SYSREG: &str = "
Sysreg	PMSCR_EL1	3	0	9	9	0
Res0	63:8
Field	7:6	PCT
Field	5	TS
Field	4	PA
Field	3	CX
Res0	2
Field	1	E1SPE
Field	0	E0SPE
EndSysreg

Sysreg	PMSICR_EL1	3	0	9	9	2
Field	63:56	ECOUNT
Res0	55:32
Field	31:0	COUNT
EndSysreg

Sysreg	PMSIRR_EL1	3	0	9	9	3
Res0	63:32
Field	31:8	INTERVAL
Res0	7:1
Field	0	RND
EndSysreg

Sysreg	PMSFCR_EL1	3	0	9	9	4
Res0	63:53
Field	52	SIMDm
Field	51	FPm
Field	50	STm
Field	49	LDm
Field	48	Bm
Res0	47:21
Field	20	SIMD
Field	19	FP
Field	18	ST
Field	17	LD
Field	16	B
Res0	15:5
Field	4	FDS
Field	3	FnE
Field	2	FL
Field	1	FT
Field	0	FE
EndSysreg

Sysreg	PMSLATFR_EL1	3	0	9	9	6
Res0	63:16
Field	15:0	MINLAT
EndSysreg

Sysreg	PMSIDR_EL1	3	0	9	9	7
Res0	63:33
Field	32	SME
Field	31:28	ALTCLK
Field	27	FPF
Field	26	EFT
Field	25	CRR
Field	24	PBT
Field	23:20	FORMAT
Enum	19:16	COUNTSIZE
Field	15:12	MAXSIZE
Enum	11:8	INTERVAL
Field	7	FDS
Field	6	FnE
Field	5	ERND
Field	4	LDS
Field	3	ARCHINST
Field	2	FL
Field	1	FT
Field	0	FE
EndSysreg

Sysreg	PMBLIMITR_EL1	3	0	9	10	0
Field	63:12	LIMIT
Res0	11:6
Field	5	PMFZ
Res0	4:3
Enum	2:1	FM
Field	0	E
EndSysreg

Sysreg	PMBSR_EL1	3	0	9	10	3
Res0	63:32
Enum	31:26	EC
Res0	25:20
Field	19	DL
Field	18	EA
Field	17	S
Field	16	COLL
Field	15:0	MSS
EndSysreg

Sysreg	PMBIDR_EL1	3	0	9	10	7
Res0	63:12
Enum	11:8	EA
Res0	7:6
Field	5	F
Field	4	P
Field	3:0	ALIGN
EndSysreg
";

/// Fields of ours that Linux's file does not define, with their source.
const NOT_IN_LINUX: &[(&str, &str, &str)] = &[
    ("PMSCR_EL1", "EE", "FEAT_SPE_EXC, Arm ARM PMSCR_EL1"),
    ("PMSCR_EL1", "KE", "FEAT_SPE_EXC, Arm ARM PMSCR_EL1"),
    ("PMSFCR_EL1", "TYPE", "B..SIMD as one field (checked below)"),
    (
        "PMSFCR_EL1",
        "TYPEM",
        "Bm..SIMDm as one field (checked below)",
    ),
    (
        "PMBLIMITR_EL1",
        "NVM",
        "FEAT_SPE_nVM, Arm ARM (Linux: RES0)",
    ),
    (
        "PMBSR",
        "BSC",
        "MSS[5:0] for buffer events (Linux: PMBSR_EL1_BUF_BSC_MASK)",
    ),
    (
        "PMBSR",
        "FSC",
        "MSS[5:0] for faults (Linux: PMBSR_EL1_FAULT_FSC_MASK)",
    ),
    ("PMBSR", "MSS2", "FEAT_SPE_EXC, Arm ARM PMBSR_EL1"),
];

/// (register, field) → (hi, lo) from the sysreg text.
fn parse(text: &str) -> Vec<(String, String, u32, u32)> {
    let mut out = Vec::new();
    let mut reg = String::new();
    for l in text.lines() {
        let w: Vec<&str> = l.split('\t').collect();
        match w.first().copied() {
            Some("Sysreg") => reg = w[1].to_string(),
            Some("Field" | "Enum") => {
                let (hi, lo) = match w[1].split_once(':') {
                    Some((h, l)) => (h.parse().unwrap(), l.parse().unwrap()),
                    None => {
                        let b = w[1].parse().unwrap();
                        (b, b)
                    }
                };
                out.push((reg.clone(), w[2].to_uppercase(), hi, lo));
            }
            _ => {}
        }
    }
    out
}

fn position(f: Field) -> (u32, u32) {
    (f.lo + f.width - 1, f.lo)
}

/// Checks `ours` (a register's fields by name) against Linux's register
/// `linux`; returns what disagrees.
fn check(linux: &str, reg: &str, ours: &[(&str, Field)]) -> Vec<String> {
    let table = parse(LINUX_SYSREG);
    let theirs: Vec<_> = table.iter().filter(|t| t.0 == linux).collect();
    assert!(
        !theirs.is_empty(),
        "{linux} is not in the transcribed table"
    );
    let mut errs = Vec::new();
    for (name, f) in ours {
        match theirs.iter().find(|t| t.1 == *name) {
            Some(t) if position(*f) != (t.2, t.3) => errs.push(format!(
                "{reg}.{name} is {:?}, Linux's sysreg has {}:{}",
                position(*f),
                t.2,
                t.3
            )),
            Some(_) => {}
            None if NOT_IN_LINUX.iter().any(|(r, n, _)| *r == reg && n == name) => {}
            None => errs.push(format!(
                "{reg}.{name} is in neither Linux's sysreg nor NOT_IN_LINUX"
            )),
        }
    }
    errs
}

/// The span of fields `first..=last` of a Linux register, as one field.
fn span(linux: &str, lo_name: &str, hi_name: &str) -> (u32, u32) {
    let table = parse(LINUX_SYSREG);
    let at = |n: &str| {
        table
            .iter()
            .find(|t| t.0 == linux && t.1 == n)
            .unwrap_or_else(|| panic!("{linux}.{n}"))
    };
    (at(hi_name).2, at(lo_name).3)
}

#[test]
fn every_field_is_where_linux_puts_it() {
    let mut errs = Vec::new();
    errs.extend(check("PMSCR_EL1", "PMSCR_EL1", regs::PMSCR_EL1::ALL));
    errs.extend(check("PMSICR_EL1", "PMSICR_EL1", regs::PMSICR_EL1::ALL));
    errs.extend(check("PMSIRR_EL1", "PMSIRR_EL1", regs::PMSIRR_EL1::ALL));
    errs.extend(check("PMSFCR_EL1", "PMSFCR_EL1", regs::PMSFCR_EL1::ALL));
    errs.extend(check(
        "PMSLATFR_EL1",
        "PMSLATFR_EL1",
        regs::PMSLATFR_EL1::ALL,
    ));
    errs.extend(check("PMSIDR_EL1", "PMSIDR_EL1", regs::PMSIDR_EL1::ALL));
    errs.extend(check(
        "PMBLIMITR_EL1",
        "PMBLIMITR_EL1",
        regs::PMBLIMITR_EL1::ALL,
    ));
    errs.extend(check("PMBSR_EL1", "PMBSR", regs::PMBSR::ALL));
    errs.extend(check("PMBIDR_EL1", "PMBIDR_EL1", regs::PMBIDR_EL1::ALL));
    // The aggregates the type filter reads.
    let fcr = |f: Field| position(f);
    if fcr(regs::PMSFCR_EL1::TYPE) != span("PMSFCR_EL1", "B", "SIMD") {
        errs.push("PMSFCR_EL1.TYPE is not B..SIMD".into());
    }
    if fcr(regs::PMSFCR_EL1::TYPEM) != span("PMSFCR_EL1", "BM", "SIMDM") {
        errs.push("PMSFCR_EL1.TYPEM is not Bm..SIMDm".into());
    }
    // BSC and FSC are MSS's low six bits.
    for f in [regs::PMBSR::BSC, regs::PMBSR::FSC] {
        if position(f) != (5, 0) {
            errs.push(format!("PMBSR.BSC/FSC at {:?}", position(f)));
        }
    }
    assert!(errs.is_empty(), "{}", errs.join("\n"));
}

/// The check catches a moved field: the masks where they used to be.
#[test]
fn a_moved_field_is_caught() {
    let moved = [("TYPEM", Field::bits(28, 24)), ("LDM", Field::bit(25))];
    let errs = check("PMSFCR_EL1", "PMSFCR_EL1", &moved);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].contains("LDM"), "{errs:?}");
    let unknown = [("XYZ", Field::bit(9))];
    assert_eq!(check("PMSFCR_EL1", "PMSFCR_EL1", &unknown).len(), 1);
    assert_ne!(
        position(Field::bits(28, 24)),
        span("PMSFCR_EL1", "BM", "SIMDM")
    );
}
