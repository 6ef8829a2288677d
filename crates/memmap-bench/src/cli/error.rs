//! Why a command line was refused ([`CliError`]), and how a failure ends the program (an
//! error message and an exit status).

use std::process::ExitCode;

/// Why a command line was refused.
#[derive(Debug)]
pub enum CliError {
    /// clap's own error (also `--help` and `--version`, which it prints with status 0).
    Clap(clap::Error),
    /// A check after parsing failed (exit status 2).
    Usage(String),
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::Clap(e) => write!(f, "{e}"),
            CliError::Usage(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for CliError {}

/// Prints `e` and returns `code`.
pub(crate) fn fail(e: &dyn std::fmt::Display, code: u8) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::from(code)
}
