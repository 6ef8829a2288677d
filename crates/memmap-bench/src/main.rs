//! `memmap-bench`: see the library documentation (`cargo doc -p memmap-bench --open`) and
//! `memmap-bench --help`.

use std::process::ExitCode;

fn main() -> ExitCode {
    memmap_bench::cli::main(std::env::args_os())
}
