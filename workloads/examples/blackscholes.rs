//! Runs [`weft_workloads::blackscholes`]: `cargo run --release -p weft-workloads --example blackscholes`.

fn main() {
    weft_workloads::blackscholes::main()
}
