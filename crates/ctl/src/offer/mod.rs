//! Offering a change to the species (issue 17, first part): the scan, the
//! individual's key, and `teneralctl offer key|check`.
pub mod scan;
