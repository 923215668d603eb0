//! Runs [`weft_workloads::reduce_combiner`]: `cargo run --release -p weft-workloads --example reduce_combiner`.

fn main() {
    weft_workloads::reduce_combiner::main()
}
