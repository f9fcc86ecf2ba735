//! The fault catalogue, its triggers and scenario files.

use super::*;

/// What kind of translation fault to report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum XlatFault {
    Translation,
    AccessFlag,
    Permission,
    AddressSize,
}

fn yes() -> bool {
    true
}

/// The catalogue of faults the model can deliver. Each is documented with
/// the PMBSR it produces in `protocol/README.md`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum FaultKind {
    /// EC 0, BSC 1 "buffer filled", where the record would have gone.
    BufferFull,
    /// DL = 1 and the record dropped; with `event` also S = 1 and BSC 1.
    DataLoss {
        #[serde(default = "yes")]
        event: bool,
    },
    /// EC 0x24, FSC 0x10 (synchronous External abort), EA = 1.
    ExternalAbort,
    /// EC 0x24 with the fault's FSC at `level` (-1..=3).
    Stage1 { fault: XlatFault, level: i8 },
    /// EC 0x25 with the fault's FSC at `level`: only where the owning
    /// regime has stage 2 (EL1&0 with EL2 enabled and HCR_EL2.VM = 1).
    Stage2 { fault: XlatFault, level: i8 },
    /// EC 0x1E: needs FEAT_RME, which the model does not implement for
    /// the buffer; refused.
    GranuleProtection,
    /// EC 0x1F with this 16-bit IMPLEMENTATION DEFINED syndrome in MSS.
    ImpDef {
        #[serde(default)]
        syndrome: u16,
    },
    /// EC 0, BSC 4 "buffer size too large" (DEN0154).
    SizeTooLarge,
    /// EC 0 with a BSC the architecture does not define.
    UnknownBsc { bsc: u8 },
    /// An EC the architecture does not define for PMBSR.
    UnknownEc { ec: u8 },
    /// COLL = 1 and the record dropped; with `event` also S = 1, BSC 1.
    Collision {
        #[serde(default = "yes")]
        event: bool,
    },
    /// PMBIRQ asserted with PMBSR.S = 0, until the guest's next access to
    /// an SPE register.
    SpuriousIrq,
    /// A buffer-full event (S = 1) whose PMBIRQ is never asserted, until
    /// software clears S.
    LostIrq,
    /// The next `records` records are written but PMBPTR does not move.
    StuckPointer {
        #[serde(default = "one")]
        records: u32,
    },
}

fn one() -> u32 {
    1
}

/// When an armed fault fires. Record triggers are checked as a record is
/// about to be written at PMBPTR.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "trigger", rename_all = "kebab-case")]
pub enum Trigger {
    /// At once, when armed.
    Now,
    /// The next record.
    NextRecord,
    /// The record after `count` more have been written.
    AfterRecords { count: u64 },
    /// The first record that would write the byte `offset` bytes past the
    /// PMBPTR value the buffer was last enabled with (so a buffer-full
    /// there leaves PMBPTR at the last record boundary at or below it).
    AtByte {
        #[serde(with = "u64_or_hex")]
        offset: u64,
    },
    /// The first record that would write the byte at virtual address `va`.
    AtVa {
        #[serde(with = "u64_or_hex")]
        va: u64,
    },
    /// `ms` milliseconds after it is armed (a scenario file's, or one armed
    /// with no VM connected: after the VM connects), then as `now`.
    AfterMs { ms: u64 },
}

/// `arm-fault`'s arguments, and a scenario file's entries: flat, with the
/// kind's and the trigger's fields beside `vcpu`. Names no field of that
/// kind and trigger takes are refused (serde's `deny_unknown_fields` does
/// not combine with `flatten`, hence [`TryFrom<Value>`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Value")]
pub struct ArmFault {
    #[serde(default)]
    pub vcpu: VcpuSel,
    #[serde(flatten)]
    pub kind: FaultKind,
    #[serde(flatten)]
    pub trigger: Trigger,
}

impl TryFrom<Value> for ArmFault {
    type Error = String;

    fn try_from(v: Value) -> Result<ArmFault, String> {
        let e = |e: serde_json::Error| e.to_string();
        let a = ArmFault {
            vcpu: v
                .get("vcpu")
                .map_or(Ok(VcpuSel::All), VcpuSel::deserialize)
                .map_err(e)?,
            kind: FaultKind::deserialize(&v).map_err(e)?,
            trigger: Trigger::deserialize(&v).map_err(e)?,
        };
        let known = serde_json::to_value(a).map_err(e)?;
        if let (Some(given), Some(known)) = (v.as_object(), known.as_object()) {
            if let Some(k) = given.keys().find(|k| !known.contains_key(*k)) {
                return Err(format!("unknown argument {k:?} for this kind and trigger"));
            }
        }
        Ok(a)
    }
}

/// A fault as `query-faults` lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArmedFaultInfo {
    pub id: u32,
    /// `None` while no VM is connected (armed for the next one).
    pub vcpu: Option<u32>,
    #[serde(flatten)]
    pub kind: FaultKind,
    #[serde(flatten)]
    pub trigger: Trigger,
}

/// A scenario file (`--scenario FILE`): faults armed for every VM that
/// connects, and the seed of the model's random numbers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default, deserialize_with = "checked_faults")]
    pub faults: Vec<ArmFault>,
}

/// The faults, each named by its index when it is wrong.
fn checked_faults<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ArmFault>, D::Error> {
    Vec::<Value>::deserialize(d)?
        .into_iter()
        .enumerate()
        .map(|(i, v)| ArmFault::try_from(v).map_err(|e| format!("faults[{i}]: {e}")))
        .collect::<Result<_, _>>()
        .map_err(serde::de::Error::custom)
}
