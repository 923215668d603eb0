//! The recording DSL (DESIGN §2, §4): values, recording, control flow, programs.
