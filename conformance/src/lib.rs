//! Conformance kits for Countersign.
#![forbid(unsafe_code)]

pub mod adapter_kit;
pub mod soak;
pub mod store_kit;
