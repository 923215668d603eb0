//! Runs [`weft_workloads::compaction`]: `cargo run --release -p weft-workloads --example compaction`.

fn main() {
    weft_workloads::compaction::main()
}
