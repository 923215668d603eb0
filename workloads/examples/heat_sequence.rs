//! Runs [`weft_workloads::heat_sequence`]: `cargo run --release -p weft-workloads --example heat_sequence`.

fn main() {
    weft_workloads::heat_sequence::main()
}
