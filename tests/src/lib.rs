//! weft-tests: the filetest runner (DESIGN §6) shared by the integration tests and tools.

pub mod filetest;
