//! Runs [`weft_workloads::particles`]: `cargo run --release -p weft-workloads --example particles`.

fn main() {
    weft_workloads::particles::main()
}
