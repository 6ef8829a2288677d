//! Named values: [`Named`], what a command line or report spelling a value by its name is
//! generic over, and [`named!`](crate::named!), which implements it for an enum from one
//! `Variant => "name"` list (so the values, their names and the parser cannot disagree).

/// A type whose values have names: every value, each one's name, and the inverse.
///
/// Enums implement it with [`named!`](crate::named!); a type whose values are not a list of
/// variants (a preset table, a parser that accepts other spellings too) implements it by hand.
pub trait Named: Copy + 'static {
    /// Every value, in the order listings (help texts, error messages) show them.
    const ALL: &'static [Self];

    /// The value's name.
    fn name(self) -> &'static str;

    /// The value named `s` (by default: the value of [`Named::ALL`] whose [`Named::name`] is `s`).
    #[must_use]
    fn from_name(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|v| v.name() == s)
    }
}

/// Implements [`Named`] for an enum from its `Variant => "name"` list, with an inherent
/// `const fn name` (for const contexts) and a `Display` that writes the name (`no_display` after
/// the type leaves `Display` to the enum).
///
/// ```
/// use memmap_core::Named;
///
/// #[derive(Debug, Clone, Copy, PartialEq, Eq)]
/// enum Side {
///     Left,
///     Right,
/// }
/// memmap_core::named!(Side { Left => "left", Right => "right" });
///
/// assert_eq!(Side::ALL, [Side::Left, Side::Right]);
/// assert_eq!(Side::Right.name(), "right");
/// assert_eq!(Side::from_name("left"), Some(Side::Left));
/// assert_eq!(Side::from_name("up"), None);
/// assert_eq!(Side::Left.to_string(), "left");
/// ```
#[macro_export]
macro_rules! named {
    ($ty:ident { $($variant:ident => $name:literal),+ $(,)? }) => {
        $crate::named!(@items $ty { $($variant => $name),+ });
        impl ::core::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str($ty::name(*self))
            }
        }
    };
    ($ty:ident, no_display { $($variant:ident => $name:literal),+ $(,)? }) => {
        $crate::named!(@items $ty { $($variant => $name),+ });
    };
    (@items $ty:ident { $($variant:ident => $name:literal),+ }) => {
        impl $ty {
            #[doc = "The value's name (`Named::name`, usable in const contexts)."]
            #[must_use]
            pub const fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name,)+
                }
            }
        }

        impl $crate::Named for $ty {
            const ALL: &'static [$ty] = &[$($ty::$variant),+];

            fn name(self) -> &'static str {
                $ty::name(self)
            }
        }
    };
}

// The generated `name` is `pub`, the test's enum is not.
#[cfg(test)]
#[allow(unreachable_pub)]
mod tests {
    use super::Named;
    use std::string::ToString;

    /// A type with its own `Display`, named without the generated one.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Loud {
        A,
        B,
    }
    crate::named!(Loud, no_display { A => "a", B => "b" });
    impl core::fmt::Display for Loud {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            write!(f, "value {}", self.name())
        }
    }

    #[test]
    fn names_round_trip_and_display_can_be_left_to_the_type() {
        assert_eq!(<Loud as Named>::ALL, &[Loud::A, Loud::B]);
        for &v in Loud::ALL {
            assert_eq!(Loud::from_name(v.name()), Some(v));
            assert_eq!(<Loud as Named>::name(v), v.name());
        }
        assert_eq!(Loud::from_name("A"), None, "names are exact");
        assert_eq!(Loud::B.to_string(), "value b");
    }
}
