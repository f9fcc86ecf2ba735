//! The subcommands other than serving: offline tools for what `--record`
//! kept (`decode`, `report`, `export`) and the control socket's client
//! (`ctl`). Each module has its subcommand's arguments and its `run`.

pub mod ctl;
pub mod decode;
pub mod export;
pub mod report;
