//! Running a guest: QEMU with its serial console in a file and QMP on a UNIX socket.

use std::fs;
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::cmd;

/// A running QEMU. Dropping it kills the process.
pub struct Guest {
    child: Child,
    serial: PathBuf,
    qmp: Option<Qmp>,
    /// The command line, for the facts.
    pub argv: Vec<String>,
}

/// A QMP connection.
pub struct Qmp {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Qmp {
    /// Reads the greeting on a new connection and negotiates the capabilities.
    fn greet(stream: UnixStream) -> Result<Self> {
        stream.set_read_timeout(Some(Duration::from_secs(120)))?;
        let writer = stream.try_clone()?;
        let mut q = Qmp { reader: BufReader::new(stream), writer };
        let mut greeting = String::new();
        q.reader.read_line(&mut greeting)?;
        q.execute("qmp_capabilities", json!({}))?;
        Ok(q)
    }

    /// Runs one QMP command and returns its `return` value.
    ///
    /// # Errors
    ///
    /// I/O errors, or the command's `error` (its description).
    pub fn execute(&mut self, command: &str, arguments: Value) -> Result<Value> {
        let msg = json!({ "execute": command, "arguments": arguments });
        self.writer.write_all(format!("{msg}\n").as_bytes())?;
        loop {
            let mut line = String::new();
            if self.reader.read_line(&mut line)? == 0 {
                bail!("QMP connection closed");
            }
            let v: Value = serde_json::from_str(&line).with_context(|| format!("QMP said {line:?}"))?;
            if let Some(r) = v.get("return") {
                return Ok(r.clone());
            }
            if let Some(e) = v.get("error") {
                bail!("{}", e.get("desc").and_then(Value::as_str).unwrap_or("QMP error"));
            }
        }
    }

    /// Runs a human-monitor command and returns its text.
    ///
    /// # Errors
    ///
    /// See [`Qmp::execute`].
    pub fn hmp(&mut self, line: &str) -> Result<String> {
        let r = self.execute("human-monitor-command", json!({ "command-line": line }))?;
        Ok(r.as_str().unwrap_or_default().to_string())
    }

    /// Copies `size` bytes of guest *virtual* memory at `addr`, as CPU 0 sees it, into `file`.
    ///
    /// # Errors
    ///
    /// The range is not mapped (QEMU stops at the first unmapped page).
    pub fn memsave(&mut self, addr: u64, size: u64, file: &Path) -> Result<()> {
        // The QAPI type of `val` is `int` (int64): kernel addresses from 2^63 up are sent as the
        // negative number with the same bits, which QEMU turns back into the same address.
        // QEMU 10 also takes them unsigned; QEMU 7.2 (Debian 12) rejects that.
        #[allow(clippy::cast_possible_wrap)]
        let val = addr as i64;
        self.execute(
            "memsave",
            json!({ "val": val, "size": size, "filename": file.display().to_string(), "cpu-index": 0 }),
        )?;
        Ok(())
    }

    /// The guest-physical address of guest-virtual `addr` (`gva2gpa`), or `None` if unmapped.
    ///
    /// # Errors
    ///
    /// I/O errors.
    pub fn gva2gpa(&mut self, addr: u64) -> Result<Option<u64>> {
        let text = self.hmp(&format!("gva2gpa {addr:#x}"))?;
        Ok(text.trim().strip_prefix("gpa: 0x").and_then(|h| u64::from_str_radix(h.trim(), 16).ok()))
    }
}

/// The most console output read from a guest (a boot prints some hundred KiB).
pub const MAX_CONSOLE_BYTES: u64 = 64 << 20;

/// What the guest printed between `@@begin` and `@@end` markers, and its verdict.
#[derive(Debug, Default, Clone)]
pub struct Console {
    /// The whole console text (its first [`MAX_CONSOLE_BYTES`]).
    pub text: String,
    /// The guest printed more than [`MAX_CONSOLE_BYTES`].
    pub truncated: bool,
}

impl Console {
    /// The lines of block `name`.
    #[must_use]
    pub fn block(&self, name: &str) -> Option<String> {
        let start = format!("@@begin {name}\n");
        let i = self.text.find(&start)? + start.len();
        let j = self.text[i..].find("@@end\n")? + i;
        Some(self.text[i..j].to_string())
    }
}

impl Guest {
    /// Starts `qemu` with `args` plus the serial, QMP and display options; `dir` holds the console
    /// log and the QMP socket.
    ///
    /// # Errors
    ///
    /// QEMU is missing or does not start.
    pub fn start(qemu: &str, args: &[String], dir: &Path) -> Result<Guest> {
        if !cmd::on_path(qemu) {
            bail!("{qemu} is not installed (Debian: qemu-system-x86 / qemu-system-arm)");
        }
        // `dir` is this boot's fresh work directory (`files::WorkDir`): nothing to clear.
        let serial = dir.join("console.log");
        let sock = dir.join("qmp.sock");
        let mut argv: Vec<String> = args.to_vec();
        argv.extend(
            [
                "-display",
                "none",
                "-monitor",
                "none",
                "-no-reboot",
                "-chardev",
                &format!("file,id=ser,path={}", crate::files::qemu_opt_path(&serial)?),
                "-serial",
                "chardev:ser",
                "-qmp",
                &format!("unix:{},server=on,wait=off", crate::files::qemu_opt_path(&sock)?),
            ]
            .map(String::from),
        );
        let child = Command::new(qemu)
            .args(&argv)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(fs::File::create(dir.join("qemu.stderr"))?))
            .spawn()
            .with_context(|| format!("starting {qemu}"))?;
        let mut g =
            Guest { child, serial, qmp: None, argv: std::iter::once(qemu.to_string()).chain(argv).collect() };
        // QEMU binds the socket before it listens on it: a connection in between is refused,
        // so refusals are retried like a socket not there yet.
        let start = Instant::now();
        loop {
            match UnixStream::connect(&sock) {
                Ok(stream) => {
                    g.qmp = Some(Qmp::greet(stream)?);
                    return Ok(g);
                }
                Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::ConnectionRefused) => {}
                Err(e) => return Err(e).with_context(|| format!("connecting to QMP at {}", sock.display())),
            }
            if let Some(status) = g.child.try_wait()? {
                let err = fs::read_to_string(dir.join("qemu.stderr")).unwrap_or_default();
                bail!("{qemu} exited at once ({status}): {err}");
            }
            if start.elapsed() > Duration::from_secs(30) {
                bail!("{qemu} did not accept a connection on its QMP socket {} within 30 s", sock.display());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The console text so far: its first [`MAX_CONSOLE_BYTES`] (a guest that prints more
    /// is stopped by [`Guest::wait_ready`]).
    #[must_use]
    pub fn console(&self) -> Console {
        let raw = fs::File::open(&self.serial)
            .ok()
            .and_then(|f| memmap_dump::read_capped(f, MAX_CONSOLE_BYTES, 0).ok());
        let (raw, truncated) = match raw {
            Some(Some(text)) => (text, false),
            Some(None) => (Vec::new(), true),
            None => (Vec::new(), false),
        };
        Console { text: String::from_utf8_lossy(&raw).replace('\r', ""), truncated }
    }

    /// Waits until the guest prints `@@ready`; fails on `@@fail`, a panic, QEMU's exit or the
    /// timeout, quoting the end of the console.
    ///
    /// # Errors
    ///
    /// See above.
    pub fn wait_ready(&mut self, timeout: Duration) -> Result<Console> {
        self.wait_for("@@ready", timeout)
    }

    /// Waits until the guest prints the line `marker`; fails as [`Guest::wait_ready`] does.
    ///
    /// # Errors
    ///
    /// See [`Guest::wait_ready`].
    pub fn wait_for(&mut self, marker: &str, timeout: Duration) -> Result<Console> {
        let start = Instant::now();
        let line = format!("\n{marker}\n");
        loop {
            let c = self.console();
            if c.text.contains(&line) {
                return Ok(c);
            }
            let tail = || {
                c.text
                    .lines()
                    .rev()
                    .take(40)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            if c.truncated {
                bail!("the guest printed more than {} on its console", memmap_dump::Bytes(MAX_CONSOLE_BYTES));
            }
            if let Some(i) = c.text.find("@@fail ") {
                let why = c.text[i..].lines().next().unwrap_or_default().to_string();
                bail!("the guest script failed: {why}\n--- console tail ---\n{}", tail());
            }
            if c.text.contains("Kernel panic") {
                bail!("the guest kernel panicked\n--- console tail ---\n{}", tail());
            }
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "QEMU exited ({status}) before the guest printed {marker}\n--- console tail ---\n{}",
                    tail()
                );
            }
            if start.elapsed() > timeout {
                bail!(
                    "the guest did not print {marker} within {} s\n--- console tail ---\n{}",
                    timeout.as_secs(),
                    tail()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The QMP connection.
    ///
    /// # Panics
    ///
    /// Never: [`Guest::start`] only returns a guest with a connection.
    pub fn qmp(&mut self) -> &mut Qmp {
        self.qmp.as_mut().expect("connected in start")
    }

    /// Asks QEMU to quit and waits for it (killing it after 10 s).
    pub fn quit(mut self) {
        if let Some(q) = self.qmp.as_mut() {
            let _ = q.execute("quit", json!({}));
        }
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// QEMU's version line.
    ///
    /// # Errors
    ///
    /// QEMU cannot be run.
    pub fn version(qemu: &str) -> Result<String> {
        let out = cmd::run(qemu, &["--version".into()], None, Duration::from_secs(30))?;
        Ok(out.stdout.lines().next().unwrap_or_default().to_string())
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}
