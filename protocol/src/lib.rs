//! placeholder

pub mod packet;
