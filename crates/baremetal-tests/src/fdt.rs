//! Just enough of a flattened device tree reader to find the RAM QEMU gave the machine (the
//! first `reg` range of the root's `memory@...` node) and a property of the first CPU node
//! (riscv64: `riscv,isa-extensions`, `riscv,cboz-block-size`).

use core::fmt;

/// `FDT_MAGIC`.
const MAGIC: u32 = 0xd00d_feed;
/// Structure block tokens.
const BEGIN_NODE: u32 = 1;
const END_NODE: u32 = 2;
const PROP: u32 = 3;
const NOP: u32 = 4;
const END: u32 = 9;

/// A RAM range.
#[derive(Clone, Copy)]
pub(crate) struct Memory {
    /// First address.
    pub(crate) base: u64,
    /// Length in bytes.
    pub(crate) size: u64,
}

/// Why no memory range was found.
#[derive(Debug)]
pub(crate) enum FdtError {
    /// The header's magic is wrong: no device tree at that address.
    BadMagic(u32),
    /// An offset or length points outside the blob.
    Truncated,
    /// An unknown structure token.
    BadToken(u32),
    /// No `memory` node with a usable `reg`.
    NoMemory,
}

impl fmt::Display for FdtError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FdtError::BadMagic(m) => write!(f, "no device tree (magic {m:#x}, expected {MAGIC:#x})"),
            FdtError::Truncated => f.write_str("device tree truncated"),
            FdtError::BadToken(t) => write!(f, "device tree: unknown token {t:#x}"),
            FdtError::NoMemory => f.write_str("device tree has no memory node with a reg property"),
        }
    }
}

/// The big-endian `u32` at `off`.
fn be32(blob: &[u8], off: usize) -> Result<u32, FdtError> {
    let b = blob.get(off..off.checked_add(4).ok_or(FdtError::Truncated)?).ok_or(FdtError::Truncated)?;
    Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// `cells` big-endian 32-bit cells at the start of `value`, as one number.
fn cells(value: &[u8], cells: u32) -> Result<u64, FdtError> {
    let mut n = 0u64;
    for i in 0..cells as usize {
        n = (n << 32) | u64::from(be32(value, 4 * i)?);
    }
    Ok(n)
}

/// The NUL-terminated string at `off`, without the NUL.
fn cstr(blob: &[u8], off: usize) -> Result<&[u8], FdtError> {
    let rest = blob.get(off..).ok_or(FdtError::Truncated)?;
    let len = rest.iter().position(|&b| b == 0).ok_or(FdtError::Truncated)?;
    Ok(&rest[..len])
}

/// The total size the header at the start of `header` declares (at least its 40 bytes).
pub(crate) fn total_size(header: &[u8]) -> Result<usize, FdtError> {
    let magic = be32(header, 0)?;
    if magic != MAGIC {
        return Err(FdtError::BadMagic(magic));
    }
    Ok(be32(header, 4)? as usize)
}

/// The first range of the first `memory` node under the root.
pub(crate) fn memory(blob: &[u8]) -> Result<Memory, FdtError> {
    total_size(blob)?;
    let mut pos = be32(blob, 8)? as usize;
    let strings = be32(blob, 12)? as usize;
    let (mut address_cells, mut size_cells) = (2u32, 1u32);
    let mut depth = 0u32;
    let mut in_memory = false;
    loop {
        let token = be32(blob, pos)?;
        pos += 4;
        match token {
            BEGIN_NODE => {
                let name = cstr(blob, pos)?;
                pos += (name.len() + 1).next_multiple_of(4);
                depth += 1;
                in_memory = depth == 2 && name.starts_with(b"memory");
            }
            END_NODE => {
                depth = depth.saturating_sub(1);
                in_memory = false;
            }
            PROP => {
                let len = be32(blob, pos)? as usize;
                let name_at =
                    strings.checked_add(be32(blob, pos + 4)? as usize).ok_or(FdtError::Truncated)?;
                let name = cstr(blob, name_at)?;
                pos += 8;
                let value = blob
                    .get(pos..pos.checked_add(len).ok_or(FdtError::Truncated)?)
                    .ok_or(FdtError::Truncated)?;
                pos += len.next_multiple_of(4);
                if depth == 1 && name == b"#address-cells" {
                    address_cells = be32(value, 0)?;
                } else if depth == 1 && name == b"#size-cells" {
                    size_cells = be32(value, 0)?;
                } else if in_memory
                    && name == b"reg"
                    && (1..=2).contains(&address_cells)
                    && (1..=2).contains(&size_cells)
                {
                    let base = cells(value, address_cells)?;
                    let size = cells(
                        value.get(4 * address_cells as usize..).ok_or(FdtError::Truncated)?,
                        size_cells,
                    )?;
                    return Ok(Memory { base, size });
                }
            }
            NOP => {}
            END => return Err(FdtError::NoMemory),
            other => return Err(FdtError::BadToken(other)),
        }
    }
}

/// The value of property `name` of the first node whose path matches `path`, each element a
/// prefix of the node name at that depth below the root (`[b"cpus", b"cpu@"]` is the first
/// CPU). `Ok(None)` if there is no such property.
#[cfg_attr(not(target_arch = "riscv64"), allow(dead_code))]
pub(crate) fn property<'a>(
    blob: &'a [u8],
    path: &[&[u8]],
    name: &[u8],
) -> Result<Option<&'a [u8]>, FdtError> {
    total_size(blob)?;
    let mut pos = be32(blob, 8)? as usize;
    let strings = be32(blob, 12)? as usize;
    // Depth below the root (the root is depth 0 once entered) and how many leading path
    // elements the current node's ancestors (and itself) matched.
    let mut depth = 0usize;
    let mut matched = 0usize;
    let mut entered_root = false;
    loop {
        let token = be32(blob, pos)?;
        pos += 4;
        match token {
            BEGIN_NODE => {
                let node = cstr(blob, pos)?;
                pos += (node.len() + 1).next_multiple_of(4);
                if !entered_root {
                    entered_root = true;
                    continue;
                }
                depth += 1;
                if matched == depth - 1 && depth <= path.len() && node.starts_with(path[depth - 1]) {
                    matched = depth;
                }
            }
            END_NODE => {
                if matched == depth && depth > 0 {
                    if depth == path.len() {
                        // The first matching node is closed without the property.
                        return Ok(None);
                    }
                    matched -= 1;
                }
                depth = depth.saturating_sub(1);
            }
            PROP => {
                let len = be32(blob, pos)? as usize;
                let name_at =
                    strings.checked_add(be32(blob, pos + 4)? as usize).ok_or(FdtError::Truncated)?;
                let prop = cstr(blob, name_at)?;
                pos += 8;
                let value = blob
                    .get(pos..pos.checked_add(len).ok_or(FdtError::Truncated)?)
                    .ok_or(FdtError::Truncated)?;
                pos += len.next_multiple_of(4);
                if matched == path.len() && depth == path.len() && prop == name {
                    return Ok(Some(value));
                }
            }
            NOP => {}
            END => return Ok(None),
            other => return Err(FdtError::BadToken(other)),
        }
    }
}
