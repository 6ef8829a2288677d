//! Running host programs with a deadline, so that an unreachable mirror or a stuck guest is a
//! clear error and never a hang.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
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
    let Some(status) = wait(&mut child, timeout, Duration::from_millis(50))? else {
        bail!("`{program} {}` did not finish within {} s and was stopped", args.join(" "), timeout.as_secs());
    };
    let stdout = String::from_utf8_lossy(&t_out.join().unwrap_or_default()).into_owned();
    let stderr = String::from_utf8_lossy(&t_err.join().unwrap_or_default()).into_owned();
    if !status.success() {
        bail!("`{program} {}` failed ({status}):\n{}", args.join(" "), stderr.trim_end());
    }
    Ok(Output { stdout, stderr })
}

/// Waits for `child` at most `timeout`; `None`, the child killed, when it ran too long.
pub(crate) fn wait(child: &mut Child, timeout: Duration, poll: Duration) -> Result<Option<ExitStatus>> {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(poll);
    }
}

/// What [`filter`] got from a program: its whole output, or the sign it printed more.
#[derive(Debug, PartialEq, Eq)]
pub enum Filtered {
    /// Everything the program printed (at most the maximum).
    Output(Vec<u8>),
    /// The program printed more than the maximum; it was stopped there.
    TooLong,
}

/// The most standard error text kept from a [`filter`] program.
const MAX_FILTER_STDERR: u64 = 64 << 10;

/// Runs `program args` with `input` on its standard input and reads at most `max` bytes of its
/// output; a program that prints more is killed ([`Filtered::TooLong`]), so a decompressor given
/// a bomb stops at the caller's limit.
///
/// # Errors
///
/// The program is missing, its output cannot be read, or it exits non-zero (with its standard
/// error, up to 64 KiB).
pub fn filter(program: &str, args: &[&str], input: &[u8], max: u64) -> Result<Filtered> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start `{program}` (is it installed?)"))?;
    let mut stdin = child.stdin.take().context("stdin pipe")?;
    let mut err = child.stderr.take().context("stderr pipe")?;
    let out = child.stdout.take().context("stdout pipe")?;
    let text = std::thread::scope(|s| {
        // A program that stops reading (it failed, or was killed) closes the pipe: the write
        // error is expected then, and its status says what happened.
        s.spawn(move || {
            let _ = std::io::Write::write_all(&mut stdin, input);
        });
        let t_err = s.spawn(move || {
            memmap_dump::read_capped(&mut err, MAX_FILTER_STDERR, 0).ok().flatten().unwrap_or_default()
        });
        let got = memmap_dump::read_capped(out, max, input.len() as u64);
        if !matches!(got, Ok(Some(_))) {
            let _ = child.kill();
        }
        (got, t_err.join().unwrap_or_default())
    });
    let status = child.wait().with_context(|| format!("waiting for `{program}`"))?;
    let (got, stderr) = text;
    match got.with_context(|| format!("reading the output of `{program}`"))? {
        None => Ok(Filtered::TooLong),
        Some(_) if !status.success() => {
            bail!(
                "`{program} {}` failed ({status}): {}",
                args.join(" "),
                String::from_utf8_lossy(&stderr).trim_end()
            )
        }
        Some(bytes) => Ok(Filtered::Output(bytes)),
    }
}

/// Whether `program` is found on `PATH`.
#[must_use]
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}
