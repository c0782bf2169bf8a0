//! Redmine adapter, shared by intake (which issue, the claim) and write-back (the REPORT
//! note, the attachment, the status): [`client`] (HTTP), [`claim`] (claim and release),
//! [`attachments`] (uploads), [`notes`] (PURE: the marker notes), [`issue`] (PURE: wire
//! types and parsing).

pub mod attachments;
pub mod claim;
pub mod client;
pub mod issue;
pub mod notes;
