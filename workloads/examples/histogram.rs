//! Runs [`weft_workloads::histogram`]: `cargo run --release -p weft-workloads --example histogram`.

fn main() {
    weft_workloads::histogram::main()
}
