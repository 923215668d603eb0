//! Runs [`weft_workloads::montecarlo`]: `cargo run --release -p weft-workloads --example montecarlo`.

fn main() {
    weft_workloads::montecarlo::main()
}
