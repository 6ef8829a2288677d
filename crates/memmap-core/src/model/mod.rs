//! What a `struct page` is: the kernel configuration and page-flags layout ([`config`]), the
//! flag bits, page types and migrate types ([`flags`]), and the struct page layouts with the
//! folio overlay ([`page`]).

pub mod config;
pub mod flags;
pub mod page;
