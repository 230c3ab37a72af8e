//! Offering a change to the species: what the kernel shares
//! (`teneral-offer`: the key, the scan, the check), and the owner's side of it.

pub use teneral_offer::*;

pub mod gates;
pub mod manage;
