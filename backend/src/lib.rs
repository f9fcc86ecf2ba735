//! placeholder

pub mod decode;
