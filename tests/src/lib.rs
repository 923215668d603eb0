//! weft-tests: the filetest runner (DESIGN §6) shared by the integration tests and tools, and
//! the random program generator of the property tests.

pub mod filetest;
pub mod gen;
