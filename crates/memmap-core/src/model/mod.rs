//! What a `struct page` is: the kernel configuration and page-flags layout ([`config`]), the
//! flag bits, page types and migrate types ([`flags`]), and the struct page layouts with the
//! folio overlay ([`page`]), what changed between kernel releases ([`version`]), and a kernel's
//! own `.config` read into a configuration ([`kconfig`]).

pub(crate) mod config;
pub(crate) mod flags;
pub(crate) mod kconfig;
pub(crate) mod page;
pub(crate) mod version;
