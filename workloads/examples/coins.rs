//! Runs [`weft_workloads::coins`]: `cargo run --release -p weft-workloads --example coins`.

fn main() {
    weft_workloads::coins::main()
}
