//! weft-tests: the filetest runner (DESIGN §6) shared by the integration tests and tools; the
//! random program generator of the property tests lives in `weft-fuzz` and is re-exported.
#![warn(missing_docs)]

pub mod filetest;
pub use weft_fuzz::gen;
