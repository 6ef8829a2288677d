//! `print!`/`println!` on the architecture's serial port (x86-64: COM1; aarch64: the PL011 of
//! QEMU's `virt` machine).

use core::fmt;

/// The serial console. Stateless: every write goes straight to the UART, polling until the
/// transmitter accepts each byte, so output written before a crash is never lost in a buffer.
pub(crate) struct Console;

impl fmt::Write for Console {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for &b in s.as_bytes() {
            if b == b'\n' {
                crate::arch::serial_write_byte(b'\r');
            }
            crate::arch::serial_write_byte(b);
        }
        Ok(())
    }
}

/// Writes formatted text to the serial console.
macro_rules! print {
    ($($arg:tt)*) => {{
        use core::fmt::Write as _;
        // Writing to the UART cannot fail: `Console::write_str` always returns `Ok`.
        let _ = write!($crate::console::Console, $($arg)*);
    }};
}

/// Writes formatted text and a newline to the serial console.
macro_rules! println {
    () => { print!("\n") };
    ($($arg:tt)*) => {{
        print!($($arg)*);
        print!("\n");
    }};
}
