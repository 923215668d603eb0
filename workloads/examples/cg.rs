//! Runs [`weft_workloads::cg`]: `cargo run --release -p weft-workloads --example cg`.

fn main() {
    weft_workloads::cg::main()
}
