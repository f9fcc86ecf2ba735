//! The plugin API versions the plugin speaks, and which one a QEMU gets.
//!
//! QEMU reads the plugin's `qemu_plugin_version` as soon as it has loaded
//! it, and refuses a version outside its own range: QEMU 10.1 and 10.2
//! take up to 5, QEMU 11.1 takes 7 and nothing older. Version 6 made
//! `qemu_plugin_read_register` return a bool; version 7 gave every
//! callback the plugin registers user data, which QEMU passes back in
//! place of the plugin's id. One build speaks both: a constructor, run
//! while QEMU loads the plugin and before it reads the version, looks for
//! a function that only QEMUs of version 6 or later export, and the
//! callbacks are then registered in that version's shape
//! (`crate::qemu`). A QEMU of exactly version 6 gets 7 and refuses it,
//! saying which version it supports.

use std::ffi::{c_int, CStr};

/// QEMU 10.1 and 10.2's version, the bindings' (`qemu-plugin-sys`).
pub const V5: c_int = 5;
/// QEMU 11.1's.
pub const V7: c_int = 7;

/// A function QEMU exports from plugin API version 6 on (10.2.2 does
/// not, 11.1.3 does).
pub const SINCE_V6: &CStr = c"qemu_plugin_set_pc";

/// The version to declare to a QEMU that exports the functions for
/// which `exported` is true.
pub fn version_for(exported: impl Fn(&CStr) -> bool) -> c_int {
    if exported(SINCE_V6) {
        V7
    } else {
        V5
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_qemu_with_the_newer_functions_gets_version_7() {
        assert_eq!(version_for(|name| name == SINCE_V6), V7);
        assert_eq!(version_for(|_| true), V7);
    }

    #[test]
    fn a_qemu_without_them_gets_version_5() {
        assert_eq!(version_for(|_| false), V5);
        assert_eq!(version_for(|name| name != SINCE_V6), V5);
    }
}
