//! Runs [`weft_workloads::ep`]: `cargo run --release -p weft-workloads --example ep`.

fn main() {
    weft_workloads::ep::main()
}
