//! TEMPORARY STAND-IN (branch `vhu` only) for the lead's SPU model, with the
//! agreed signatures, so the vhost-user front end compiles and its tests run.
//! Delete when main's real `spu` module is merged.

use std::collections::HashMap;

use spe_protocol::regs::{AccessOutcome, SysReg};

#[derive(Clone, Debug)]
pub struct Features {
    pmsidr: u64,
    pmbidr: u64,
    pmsver: u64,
}

impl Default for Features {
    fn default() -> Self {
        Self::neoverse_n1()
    }
}

impl Features {
    // FE|FT|FL|ArchInst|LDS|ERnd, Interval code 4 (1024), MaxSize 6, CountSize 2.
    const BASE_PMSIDR: u64 = 0x3f | 4 << 8 | 6 << 12 | 2 << 16;

    pub fn neoverse_n1() -> Self {
        Features {
            pmsidr: Self::BASE_PMSIDR,
            pmbidr: 0,
            pmsver: 1,
        }
    }
    pub fn neoverse_v1() -> Self {
        Features {
            pmsidr: Self::BASE_PMSIDR,
            pmbidr: 0,
            pmsver: 2,
        }
    }
    pub fn max() -> Self {
        Features {
            pmsidr: Self::BASE_PMSIDR,
            pmbidr: 0,
            pmsver: 5,
        }
    }
    pub fn pmsidr(&self) -> u64 {
        self.pmsidr
    }
    pub fn pmbidr(&self) -> u64 {
        self.pmbidr
    }
    pub fn id_aa64dfr0_spe_fields(&self) -> u64 {
        self.pmsver << 32
    }
}

pub struct Spu {
    features: Features,
    regs: HashMap<SysReg, u64>,
}

impl Spu {
    pub fn new(features: Features) -> Self {
        Spu {
            features,
            regs: HashMap::new(),
        }
    }
    pub fn reset(&mut self) {
        self.regs.clear();
    }
    pub fn read_sysreg(&mut self, reg: SysReg) -> Result<u64, AccessOutcome> {
        Ok(match reg {
            SysReg::PmsidrEl1 => self.features.pmsidr,
            SysReg::PmbidrEl1 => self.features.pmbidr,
            r => self.regs.get(&r).copied().unwrap_or(0),
        })
    }
    pub fn write_sysreg(&mut self, reg: SysReg, value: u64) -> Result<(), AccessOutcome> {
        match reg {
            SysReg::PmsidrEl1 | SysReg::PmbidrEl1 => Err(AccessOutcome::Undefined),
            r => {
                self.regs.insert(r, value);
                Ok(())
            }
        }
    }
    pub fn pmbirq(&self) -> bool {
        self.pmbsr() & (1 << 17) != 0
    }
    pub fn pmbsr(&self) -> u64 {
        self.regs.get(&SysReg::PmbsrEl1).copied().unwrap_or(0)
    }
}
