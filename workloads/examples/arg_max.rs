//! Runs [`weft_workloads::arg_max`]: `cargo run --release -p weft-workloads --example arg_max`.

fn main() {
    weft_workloads::arg_max::main()
}
