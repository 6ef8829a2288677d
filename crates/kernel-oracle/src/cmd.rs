//! Running host programs with a deadline, so that an unreachable mirror or a stuck guest is a
//! clear error and never a hang.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// What a finished program printed.
#[derive(Debug)]
pub struct Output {
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// Runs `program args` in `cwd` (if given), waits at most `timeout`, and fails with the
/// program's standard error when it exits non-zero or runs too long.
///
/// # Errors
///
/// The program is missing, exits non-zero, or does not finish in time (it is then killed).
pub fn run(program: &str, args: &[String], cwd: Option<&Path>, timeout: Duration) -> Result<Output> {
    let mut cmd = Command::new(program);
    cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    let mut child = cmd.spawn().with_context(|| format!("cannot start `{program}` (is it installed?)"))?;
    // Drain both pipes on threads so a chatty program cannot block on a full pipe.
    let mut out = child.stdout.take().context("stdout pipe")?;
    let mut err = child.stderr.take().context("stderr pipe")?;
    let t_out = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "`{program} {}` did not finish within {} s and was stopped",
                args.join(" "),
                timeout.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = String::from_utf8_lossy(&t_out.join().unwrap_or_default()).into_owned();
    let stderr = String::from_utf8_lossy(&t_err.join().unwrap_or_default()).into_owned();
    if !status.success() {
        bail!("`{program} {}` failed ({status}):\n{}", args.join(" "), stderr.trim_end());
    }
    Ok(Output { stdout, stderr })
}

/// Whether `program` is found on `PATH`.
#[must_use]
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}
