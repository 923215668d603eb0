//! The `weft` command-line tool: check, format and run `.weft` IR files.

fn main() {
    std::process::exit(weft_cli::cli::main());
}
