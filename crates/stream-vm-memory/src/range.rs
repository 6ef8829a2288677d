//! Range checks and the cutting of a range into pieces, before anything is written.

use vm_memory::bitmap::{BS, Bitmap};
use vm_memory::volatile_memory::PtrGuardMut;
use vm_memory::{
    GuestAddress, GuestMemory, GuestMemoryBackend, GuestMemoryError, GuestMemoryRegion, MemoryRegionAddress,
    Permissions, VolatileSlice,
};

use crate::backing::{HostBacking, RegionBacking};
use crate::engine::RegionPart;
use crate::error::Error;
use crate::fault::{check_fault_in, check_refusals};

/// Whether `addr + len` passes 2^64 (a range may end exactly there, its last byte at
/// `u64::MAX`).
pub(crate) fn overflows(addr: GuestAddress, len: usize) -> bool {
    u128::from(addr.0) + len as u128 > 1u128 << 64
}

/// How the bytes of one `VolatileSlice` of a [`GuestMemory`] are backed: by the region of its
/// physical memory that maps them, when there is one (see [`slice_backing`]).
#[derive(Clone, Copy)]
pub(crate) struct SliceBacking<'m> {
    /// The region's backing ([`HostBacking::UNKNOWN`] when no region was found).
    pub(crate) backing: HostBacking<'m>,
    /// Host address of the region's first byte (the slice's, when no region was found).
    pub(crate) region_host: usize,
    /// The region's length (the slice's, when no region was found).
    pub(crate) region_len: usize,
    /// Offset of the slice's first byte in the region.
    pub(crate) region_off: u64,
}

/// The backing of the slice of `n` bytes at host address `host` that starts at guest `guest` of
/// `mem`: its region's, when `mem` is its own physical memory (no IOMMU in between) and that
/// region maps the guest address at `host`; unknown otherwise (then every page is faulted in
/// before it is written, see [`crate::Stores`]).
pub(crate) fn slice_backing<'m, M>(mem: &'m M, guest: GuestAddress, host: usize, n: usize) -> SliceBacking<'m>
where
    M: GuestMemory + ?Sized,
    <M::PhysicalMemory as GuestMemoryBackend>::R: RegionBacking,
{
    if let Some(r) = mem.physical_memory().and_then(|pm| pm.find_region(guest)) {
        let off = guest.0 - r.start_addr().0;
        if let (Ok(base), Ok(off_us)) = (r.get_host_address(MemoryRegionAddress(0)), usize::try_from(off)) {
            if (base as usize).checked_add(off_us) == Some(host) {
                return SliceBacking {
                    backing: r.host_backing(),
                    region_host: base as usize,
                    region_len: usize::try_from(r.len()).unwrap_or(usize::MAX),
                    region_off: off,
                };
            }
        }
    }
    SliceBacking { backing: HostBacking::UNKNOWN, region_host: host, region_len: n, region_off: 0 }
}

/// Checks that `addr..addr + len` is guest memory that can be written without a signal as far
/// as can be told before writing ([`check_refusals`], [`check_fault_in`]); returns the host
/// address and backing of its first slice, for the writer to reuse.
pub(crate) fn check<'m, M>(
    mem: &'m M,
    addr: GuestAddress,
    len: usize,
) -> Result<Option<(usize, SliceBacking<'m>)>, Error>
where
    M: GuestMemory + ?Sized,
    <M::PhysicalMemory as GuestMemoryBackend>::R: RegionBacking,
{
    if overflows(addr, len) {
        return Err(Error::AddressOverflow { addr, len });
    }
    let mut covered = 0usize;
    let mut first = None;
    for slice in mem.get_slices(addr, len, Permissions::Write).map_err(|e| classify(e, addr, len, covered))? {
        let s = slice.map_err(|e| classify(e, addr, len, covered))?;
        let n = s.len();
        let host = s.ptr_guard_mut().as_ptr() as usize;
        let guest = GuestAddress(addr.0.wrapping_add(covered as u64));
        let sb = slice_backing(mem, guest, host, n);
        check_refusals(&sb.backing, guest, sb.region_off, n)?;
        check_fault_in(&sb.backing, guest, n)?;
        if covered == 0 {
            first = Some((host, sb));
        }
        covered += n;
    }
    Ok(first)
}

/// Turns a `vm-memory` error for the range into this crate's error; `covered` bytes from
/// `addr` on were found to be guest memory before it.
pub(crate) fn classify(e: GuestMemoryError, addr: GuestAddress, len: usize, covered: usize) -> Error {
    match e {
        GuestMemoryError::InvalidGuestAddress(first_invalid) => {
            Error::OutOfRange { addr, len, first_invalid }
        }
        // The range was checked not to pass 2^64, so this can only mean it ends exactly there
        // with more requested than the regions hold; report the first byte past the last one.
        GuestMemoryError::GuestAddressOverflow => {
            Error::OutOfRange { addr, len, first_invalid: GuestAddress(addr.0.wrapping_add(covered as u64)) }
        }
        e => Error::Memory(e),
    }
}

/// The pieces of a range of any [`GuestMemory`], with the `VolatileSlice`s and pointer guards
/// that keep their mappings alive while the raw host addresses are in use.
pub(crate) struct SlicePieces<'m, B: Bitmap + 'm> {
    pub(crate) pieces: Vec<RegionPart<'m, BS<'m, B>>>,
    _slices: Vec<VolatileSlice<'m, BS<'m, B>>>,
    _guards: Vec<PtrGuardMut>,
}

/// Cuts `addr..addr + len` of `mem` into pieces, one per `VolatileSlice`, checking each as
/// [`check`] does. Nothing is written.
pub(crate) fn slice_pieces<'m, M>(
    mem: &'m M,
    addr: GuestAddress,
    len: usize,
) -> Result<SlicePieces<'m, M::Bitmap>, Error>
where
    M: GuestMemory + ?Sized,
    <M::PhysicalMemory as GuestMemoryBackend>::R: RegionBacking,
{
    if overflows(addr, len) {
        return Err(Error::AddressOverflow { addr, len });
    }
    let mut out = SlicePieces { pieces: Vec::new(), _slices: Vec::new(), _guards: Vec::new() };
    let mut done = 0usize;
    for slice in mem.get_slices(addr, len, Permissions::Write).map_err(|e| classify(e, addr, len, done))? {
        let slice = slice.map_err(|e| classify(e, addr, len, done))?;
        let n = slice.len();
        // Keeps the mapping alive (and, for backends that map on demand, mapped for writing)
        // while the raw pointer is in use: the guard lives in `out` until the work is done.
        let guard = slice.ptr_guard_mut();
        let host = guard.as_ptr() as usize;
        let guest = GuestAddress(addr.0.wrapping_add(done as u64));
        let sb = slice_backing(mem, guest, host, n);
        check_refusals(&sb.backing, guest, sb.region_off, n)?;
        check_fault_in(&sb.backing, guest, n)?;
        out.pieces.push(RegionPart {
            guest,
            host,
            len: n,
            range_off: done as u64,
            bitmap: slice.bitmap().clone(),
            backing: sb.backing,
            region_host: sb.region_host,
            region_len: sb.region_len,
        });
        out._slices.push(slice);
        out._guards.push(guard);
        done += n;
    }
    debug_assert_eq!(done, len);
    Ok(out)
}

/// The pieces of a range of a [`GuestMemoryBackend`] whose regions say how they are backed,
/// one per region the range crosses, after checking the whole range (nothing is written).
pub(crate) struct RegionPieces<'m, B: Bitmap + 'm> {
    pub(crate) pieces: Vec<RegionPart<'m, BS<'m, B>>>,
    _slices: Vec<VolatileSlice<'m, BS<'m, B>>>,
    _guards: Vec<PtrGuardMut>,
}

impl<'m, B: Bitmap + 'm> RegionPieces<'m, B> {
    /// The bytes of all pieces.
    pub(crate) fn total(&self) -> u64 {
        self.pieces.iter().map(|p| p.len as u64).sum()
    }

    fn new() -> Self {
        RegionPieces { pieces: Vec::new(), _slices: Vec::new(), _guards: Vec::new() }
    }

    /// Adds bytes `off..off + n` of `region`, `range_off` bytes into the caller's range.
    fn push<R>(&mut self, region: &'m R, off: u64, n: usize, range_off: u64) -> Result<(), Error>
    where
        R: RegionBacking<B = B>,
    {
        let slice = region.get_slice(MemoryRegionAddress(off), n).map_err(Error::Memory)?;
        let guard = slice.ptr_guard_mut();
        let host = guard.as_ptr() as usize;
        // The host extent of the whole region, for page rounding; where the region cannot say
        // (no host address), the piece alone, and nothing is known of its backing.
        let (backing, region_host, region_len, region_off) = match region
            .get_host_address(MemoryRegionAddress(0))
        {
            Ok(p) if usize::try_from(off).ok().and_then(|o| (p as usize).checked_add(o)) == Some(host) => {
                (region.host_backing(), p as usize, usize::try_from(region.len()).unwrap_or(usize::MAX), off)
            }
            _ => (HostBacking::UNKNOWN, host, n, 0),
        };
        let guest = GuestAddress(region.start_addr().0 + off);
        check_refusals(&backing, guest, region_off, n)?;
        self.pieces.push(RegionPart {
            guest,
            host,
            len: n,
            range_off,
            bitmap: slice.bitmap().clone(),
            backing,
            region_host,
            region_len,
        });
        self._slices.push(slice);
        self._guards.push(guard);
        Ok(())
    }
}

impl<B: Bitmap> RegionPieces<'_, B> {
    /// Refuses, before anything is done, pieces whose stores need their pages faulted in first
    /// on a host that cannot ([`check_fault_in`]).
    pub(crate) fn check_fault_in(&self) -> Result<(), Error> {
        self.pieces.iter().try_for_each(|p| check_fault_in(&p.backing, p.guest, p.len))
    }
}

/// Cuts `addr..addr + len` into region pieces (see [`RegionPieces`]), refusing regions that
/// are not writable and ranges that reach pages past the end of a mapped file
/// ([`check_refusals`]).
pub(crate) fn region_pieces<'m, M>(
    mem: &'m M,
    addr: GuestAddress,
    len: usize,
) -> Result<RegionPieces<'m, <M::R as GuestMemoryRegion>::B>, Error>
where
    M: GuestMemoryBackend + ?Sized,
    M::R: RegionBacking,
{
    if overflows(addr, len) {
        return Err(Error::AddressOverflow { addr, len });
    }
    let mut out = RegionPieces::new();
    let mut done = 0usize;
    while done < len {
        // `addr + done < 2^64`: `done < len` and the range does not pass 2^64.
        let cur = GuestAddress(addr.0 + done as u64);
        let region = mem.find_region(cur).ok_or(Error::OutOfRange { addr, len, first_invalid: cur })?;
        let off = cur.0 - region.start_addr().0;
        let n = usize::try_from(region.len() - off).unwrap_or(usize::MAX).min(len - done);
        out.push(region, off, n, done as u64)?;
        done += n;
    }
    Ok(out)
}

/// Every region of `mem`, whole, as region pieces.
pub(crate) fn all_region_pieces<M>(mem: &M) -> Result<RegionPieces<'_, <M::R as GuestMemoryRegion>::B>, Error>
where
    M: GuestMemoryBackend + ?Sized,
    M::R: RegionBacking,
{
    let mut out = RegionPieces::new();
    let mut range_off = 0u64;
    for region in mem.iter() {
        let n = usize::try_from(region.len())
            .map_err(|_| Error::AddressOverflow { addr: region.start_addr(), len: usize::MAX })?;
        if n > 0 {
            out.push(region, 0, n, range_off)?;
        }
        range_off += n as u64;
    }
    Ok(out)
}
