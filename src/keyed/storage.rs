//! Where a table's slots live: an array (no heap, `const`-constructible) or,
//! with the `alloc` feature, a boxed slice sized at run time.

use super::slot::Slot;

mod sealed {
    pub trait Sealed {}
}

/// The slot storage of a table: a `[Slot; N]` array, or (feature `alloc`) a
/// boxed slice. Sealed.
pub trait Storage: sealed::Sealed {
    /// The slots.
    fn slots(&self) -> &[Slot];
}

impl<const N: usize> sealed::Sealed for [Slot; N] {}
impl<const N: usize> Storage for [Slot; N] {
    #[inline(always)]
    fn slots(&self) -> &[Slot] {
        self
    }
}

#[cfg(feature = "alloc")]
impl sealed::Sealed for alloc::boxed::Box<[Slot]> {}
#[cfg(feature = "alloc")]
impl Storage for alloc::boxed::Box<[Slot]> {
    #[inline(always)]
    fn slots(&self) -> &[Slot] {
        self
    }
}

/// `capacity` empty slots on the heap.
#[cfg(feature = "alloc")]
pub(super) fn boxed(capacity: usize) -> alloc::boxed::Box<[Slot]> {
    (0..capacity).map(|_| Slot::new(0)).collect()
}
