//! Runs [`weft_workloads::vecadd`]: `cargo run --release -p weft-workloads --example vecadd`.

fn main() {
    weft_workloads::vecadd::main()
}
