//! Runs [`weft_workloads::reflect`]: `cargo run --release -p weft-workloads --example reflect`.

fn main() {
    weft_workloads::reflect::main()
}
