//! Runs [`weft_workloads::jacobi`]: `cargo run --release -p weft-workloads --example jacobi`.

fn main() {
    weft_workloads::jacobi::main()
}
