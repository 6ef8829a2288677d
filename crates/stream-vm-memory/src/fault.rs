//! Keeping stores from raising signals: the checks made before anything is written, and the
//! `MADV_POPULATE_WRITE` fault-in right before stores into memory that may refuse a page
//! ([`Stores`]).

use vm_memory::GuestAddress;

use crate::backing::{HostBacking, Stores};
use crate::engine::RegionPart;
use crate::error::{Error, Unwritable};
use crate::residency::run_end;
use crate::sys::{self, Advice};

/// Bytes per `MADV_POPULATE_WRITE` call: 16 MiB (or the region's page size, if larger), so
/// cancellation and a thread start (waiting for `mmap_lock`) wait for one call at most.
pub(crate) const POPULATE_STEP: usize = 16 << 20;

/// Base pages asked of `mincore` per step: a step is at most [`POPULATE_STEP`] (16 MiB), 4096
/// pages of 4 KiB.
const MINCORE_PAGES: usize = POPULATE_STEP / 4096;

/// Refuses, before anything is done, `len` bytes at guest `guest` that start `region_off` bytes
/// into a region backed by `b`, when the region is not writable or the bytes reach pages past
/// the end of its file.
pub(crate) fn check_refusals(
    b: &HostBacking<'_>,
    guest: GuestAddress,
    region_off: u64,
    len: usize,
) -> Result<(), Error> {
    if let Stores::Refused { prot } = b.stores() {
        return Err(Error::Unwritable { addr: guest, len: len as u64, why: Unwritable::Protection { prot } });
    }
    if let Some((inside, file_len)) = b.file_end() {
        let end = region_off.saturating_add(len as u64);
        if end > inside {
            let from = inside.max(region_off);
            return Err(Error::Unwritable {
                addr: GuestAddress(guest.0.wrapping_add(from - region_off)),
                len: end - from,
                why: Unwritable::PastEndOfFile { file_len, file_offset: b.file.map_or(0, |(_, o)| o) },
            });
        }
    }
    Ok(())
}

/// Refuses, before anything is done, `len` bytes at guest `guest` backed by `b` whose stores
/// need their pages faulted in first when this host has no `MADV_POPULATE_WRITE`.
pub(crate) fn check_fault_in(b: &HostBacking<'_>, guest: GuestAddress, len: usize) -> Result<(), Error> {
    match b.stores() {
        Stores::FaultInAll | Stores::FaultInAbsent if !sys::takes_effect(Advice::PopulateWrite) => {
            Err(Error::Unwritable {
                addr: guest,
                len: len as u64,
                why: Unwritable::Unchecked { backing: b.kind },
            })
        }
        _ => Ok(()),
    }
}

/// Makes stores into the `n` bytes at host address `host` (guest `guest`), backed by `b`,
/// unable to raise a signal, as [`HostBacking::stores`] asks: nothing for [`Stores::Direct`];
/// for [`Stores::FaultInAll`] every page, for [`Stores::FaultInAbsent`] every page `mincore`
/// does not report resident, faulted in for writing, [`POPULATE_STEP`] bytes per call. The
/// kernel's refusal is [`Unwritable::Refused`] for the guest range of the refused call.
///
/// The bytes must be mapped for the whole call (the caller holds the `VolatileSlice` or the
/// region that maps them).
pub(crate) fn prepare(b: &HostBacking<'_>, guest: GuestAddress, host: usize, n: usize) -> Result<(), Error> {
    let absent_only = match b.stores() {
        Stores::Direct => return Ok(()),
        Stores::Refused { prot } => {
            return Err(Error::Unwritable {
                addr: guest,
                len: n as u64,
                why: Unwritable::Protection { prot },
            });
        }
        Stores::FaultInAbsent => true,
        Stores::FaultInAll => false,
    };
    if n == 0 {
        return Ok(());
    }
    // Whole base pages: the page that holds a mapped byte is mapped (a mapping is made of whole
    // pages), and MADV_POPULATE_WRITE takes base-page-aligned ranges, hugetlbfs ones included.
    let base = sys::base_page();
    let (lo, hi) = (host / base * base, (host + n).next_multiple_of(base));
    let step = POPULATE_STEP.min(MINCORE_PAGES * base);
    let caller = Caller { backing: b, guest, host, n };
    let mut at = lo;
    while at < hi {
        let end = (at + step).min(hi);
        // For one page, asking `mincore` first costs more than faulting it in (both are one
        // call, and a resident page is found at once).
        if absent_only && end - at > base {
            caller.fault_in_absent(at, end)?;
        } else {
            caller.fault_in(at, end)?;
        }
        at = end;
    }
    Ok(())
}

/// The bytes a [`prepare`] call is for: guest `guest`, at host address `host`, `n` of them,
/// backed by `backing`; what a refusal's guest range is cut from.
struct Caller<'a, 'b> {
    backing: &'a HostBacking<'b>,
    guest: GuestAddress,
    host: usize,
    n: usize,
}

impl Caller<'_, '_> {
    /// Faults the pages of the host range `[a, b)` in for writing.
    fn fault_in(&self, a: usize, b: usize) -> Result<(), Error> {
        // SAFETY: `[a, b)` is the whole base pages that hold bytes of `[host, host + n)`, which
        // the caller keeps mapped for the whole call (`prepare`'s contract), and a page that
        // holds a mapped byte is mapped; MADV_POPULATE_WRITE changes no byte (it faults pages
        // in as a store would, without storing).
        match unsafe { sys::madvise(a, b - a, Advice::PopulateWrite) } {
            Ok(()) => Ok(()),
            Err(e) => {
                let (x, y) = (a.max(self.host), b.min(self.host + self.n));
                let addr = GuestAddress(self.guest.0.wrapping_add((x - self.host) as u64));
                let why = if e.kind() == std::io::ErrorKind::Unsupported {
                    Unwritable::Unchecked { backing: self.backing.kind }
                } else {
                    Unwritable::Refused(e)
                };
                Err(Error::Unwritable { addr, len: y.saturating_sub(x) as u64, why })
            }
        }
    }

    /// [`Caller::fault_in`] of the pages of `[a, b)` (at most [`MINCORE_PAGES`] base pages)
    /// that `mincore` does not report resident (all of them if it cannot say).
    fn fault_in_absent(&self, a: usize, b: usize) -> Result<(), Error> {
        let base = sys::base_page();
        let mut vec = [0u8; MINCORE_PAGES];
        let pages = (b - a) / base;
        let flags = &mut vec[..pages];
        if sys::mincore_into(a, b - a, flags).is_err() {
            return self.fault_in(a, b);
        }
        let mut i = 0;
        while i < pages {
            let resident = flags[i] & 1 == 1;
            let j = run_end(flags, i + 1, resident);
            if !resident {
                self.fault_in(a + i * base, a + j * base)?;
            }
            i = j;
        }
        Ok(())
    }
}

/// [`prepare`] for bytes `off..off + n` of `p`.
pub(crate) fn prepare_part<B>(p: &RegionPart<'_, B>, off: usize, n: usize) -> Result<(), Error> {
    prepare(&p.backing, GuestAddress(p.guest.0.wrapping_add(off as u64)), p.host + off, n)
}
