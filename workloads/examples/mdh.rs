//! Runs [`weft_workloads::mdh`]: `cargo run --release -p weft-workloads --example mdh`.

fn main() {
    weft_workloads::mdh::main()
}
