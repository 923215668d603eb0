//! Runs [`weft_workloads::func_arrays`]: `cargo run --release -p weft-workloads --example func_arrays`.

fn main() {
    weft_workloads::func_arrays::main()
}
