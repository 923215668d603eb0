//! Interned IR types: scalars, short tuples (`<N x T>`) and random-access arrays with a boundary mode.

use std::collections::HashMap;
use std::fmt;
use std::sync::{OnceLock, RwLock};

/// A scalar element type (DESIGN §2). Sizes are in bits; `bool` is stored as one byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScalarType {
    /// Truth value (`true`/`false`).
    Bool,
    /// Signed 8-bit integer, two's complement.
    I8,
    /// Signed 16-bit integer.
    I16,
    /// Signed 32-bit integer.
    I32,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 8-bit integer.
    U8,
    /// Unsigned 16-bit integer.
    U16,
    /// Unsigned 32-bit integer.
    U32,
    /// Unsigned 64-bit integer.
    U64,
    /// IEEE 754 binary16 (through the `half` crate).
    F16,
    /// IEEE 754 binary32.
    F32,
    /// IEEE 754 binary64.
    F64,
}

impl ScalarType {
    /// Every scalar type, in declaration order.
    pub const ALL: [ScalarType; 12] = [
        ScalarType::Bool,
        ScalarType::I8,
        ScalarType::I16,
        ScalarType::I32,
        ScalarType::I64,
        ScalarType::U8,
        ScalarType::U16,
        ScalarType::U32,
        ScalarType::U64,
        ScalarType::F16,
        ScalarType::F32,
        ScalarType::F64,
    ];

    /// The text-format name (`f32`, `u8`, `bool`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ScalarType::Bool => "bool",
            ScalarType::I8 => "i8",
            ScalarType::I16 => "i16",
            ScalarType::I32 => "i32",
            ScalarType::I64 => "i64",
            ScalarType::U8 => "u8",
            ScalarType::U16 => "u16",
            ScalarType::U32 => "u32",
            ScalarType::U64 => "u64",
            ScalarType::F16 => "f16",
            ScalarType::F32 => "f32",
            ScalarType::F64 => "f64",
        }
    }

    /// Parses a text-format scalar name.
    pub fn from_name(s: &str) -> Option<ScalarType> {
        ScalarType::ALL.into_iter().find(|t| t.name() == s)
    }

    /// Width in bits (bool counts as 1).
    pub fn bits(self) -> u32 {
        match self {
            ScalarType::Bool => 1,
            ScalarType::I8 | ScalarType::U8 => 8,
            ScalarType::I16 | ScalarType::U16 | ScalarType::F16 => 16,
            ScalarType::I32 | ScalarType::U32 | ScalarType::F32 => 32,
            ScalarType::I64 | ScalarType::U64 | ScalarType::F64 => 64,
        }
    }

    /// Storage size in bytes (bool is one byte).
    pub fn bytes(self) -> usize {
        (self.bits() as usize).div_ceil(8)
    }

    /// True for the IEEE float types.
    pub fn is_float(self) -> bool {
        matches!(self, ScalarType::F16 | ScalarType::F32 | ScalarType::F64)
    }

    /// True for the signed and unsigned integer types.
    pub fn is_int(self) -> bool {
        !self.is_float() && self != ScalarType::Bool
    }

    /// True for the signed integer types.
    pub fn is_signed_int(self) -> bool {
        matches!(
            self,
            ScalarType::I8 | ScalarType::I16 | ScalarType::I32 | ScalarType::I64
        )
    }

    /// True for numeric types (integers and floats, not bool).
    pub fn is_numeric(self) -> bool {
        self != ScalarType::Bool
    }
}

impl fmt::Display for ScalarType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What an array read returns for coordinates outside the array (DESIGN §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Boundary {
    /// Coordinates are clamped to `[0, n-1]` on each axis (the default).
    Clamp,
    /// Coordinates wrap around (Euclidean modulo `n`) on each axis.
    Repeat,
    /// Any coordinate out of range yields this constant; lanes are raw bits,
    /// one per lane of the element type (see [`crate::Const`]).
    Constant([u64; 4]),
}

impl Boundary {
    /// Out-of-range reads yield the constant `c`: a [`crate::Const`] or a host scalar or
    /// array of lanes (`Boundary::constant(0.0f32)`, `Boundary::constant([0u8, 0, 0, 255])`).
    /// Its lanes are used as bits of the array's element type, so give a value of that
    /// type (`0.0f32` for an f32 array, not `0.0`, which is an f64).
    pub fn constant(c: impl Into<crate::Const>) -> Boundary {
        let c = c.into();
        Boundary::Constant(c.lanes)
    }
}

/// The structure of an interned type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TypeKind {
    /// A single scalar.
    Scalar(ScalarType),
    /// A short vector `<N x T>` of N = 2, 3 or 4 scalars (RapidMind's `Value<N,T>`).
    Tuple(ScalarType, u8),
    /// A random-access array `array<D x E, boundary>` with D = 1, 2 or 3 axes whose elements
    /// are scalars or tuples (`lanes` = 1 for scalars).
    Array {
        /// Number of axes, 1..=3.
        dims: u8,
        /// Element scalar type.
        elem: ScalarType,
        /// Element lanes: 1 for a scalar element, 2..=4 for a tuple element.
        lanes: u8,
        /// Out-of-bounds behaviour.
        boundary: Boundary,
    },
}

/// An interned type handle: `Copy`, compared by identity, valid for the whole process.
///
/// Types are interned in one process-wide table, so a `Type` needs no context to be
/// inspected ([`Type::kind`]) and two equal types always have equal handles.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Type(u32);

struct Interner {
    kinds: Vec<&'static TypeKind>,
    map: HashMap<TypeKind, u32>,
}

fn interner() -> &'static RwLock<Interner> {
    static I: OnceLock<RwLock<Interner>> = OnceLock::new();
    I.get_or_init(|| {
        let mut i = Interner {
            kinds: Vec::new(),
            map: HashMap::new(),
        };
        // Scalars get the fixed handles 0..12 so `Type::scalar` needs no lock.
        for s in ScalarType::ALL {
            let k = TypeKind::Scalar(s);
            i.map.insert(k, i.kinds.len() as u32);
            i.kinds.push(Box::leak(Box::new(k)));
        }
        RwLock::new(i)
    })
}

impl Type {
    /// Interns a type structure. Tuple lane counts must be 2..=4 and array dims 1..=3;
    /// use [`Type::tuple`] / [`Type::array`] for checked construction.
    pub fn intern(kind: TypeKind) -> Type {
        let lock = interner();
        if let Some(&id) = lock
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .map
            .get(&kind)
        {
            return Type(id);
        }
        let mut w = lock.write().unwrap_or_else(|e| e.into_inner());
        if let Some(&id) = w.map.get(&kind) {
            return Type(id);
        }
        let id = w.kinds.len() as u32;
        w.kinds.push(Box::leak(Box::new(kind)));
        w.map.insert(kind, id);
        Type(id)
    }

    /// The structure of this type. Scalars (the fixed handles `0..12`) need no lock.
    pub fn kind(self) -> TypeKind {
        if let Some(&s) = ScalarType::ALL.get(self.0 as usize) {
            return TypeKind::Scalar(s);
        }
        *interner().read().unwrap_or_else(|e| e.into_inner()).kinds[self.0 as usize]
    }

    /// The scalar type `s` (a fixed handle: no lock).
    pub fn scalar(s: ScalarType) -> Type {
        interner();
        Type(s as u32)
    }

    /// `<n x s>`; `n == 1` gives the scalar `s`. `None` if `n` is not 1..=4.
    pub fn tuple(s: ScalarType, n: u8) -> Option<Type> {
        match n {
            1 => Some(Type::scalar(s)),
            2..=4 => Some(Type::intern(TypeKind::Tuple(s, n))),
            _ => None,
        }
    }

    /// `array<dims x elem, boundary>`; `elem` must be a scalar or tuple and `dims` 1..=3.
    pub fn array(dims: u8, elem: Type, boundary: Boundary) -> Option<Type> {
        if !(1..=3).contains(&dims) {
            return None;
        }
        let (s, lanes) = elem.lanes()?;
        Some(Type::intern(TypeKind::Array {
            dims,
            elem: s,
            lanes,
            boundary,
        }))
    }

    /// Shorthand for common scalars.
    pub fn bool() -> Type {
        Type::scalar(ScalarType::Bool)
    }
    /// `i32`.
    pub fn i32() -> Type {
        Type::scalar(ScalarType::I32)
    }
    /// `i64`.
    pub fn i64() -> Type {
        Type::scalar(ScalarType::I64)
    }
    /// `f32`.
    pub fn f32() -> Type {
        Type::scalar(ScalarType::F32)
    }
    /// `f64`.
    pub fn f64() -> Type {
        Type::scalar(ScalarType::F64)
    }

    /// For a scalar or tuple: its element scalar type and lane count (1 for a scalar).
    /// `None` for arrays.
    pub fn lanes(self) -> Option<(ScalarType, u8)> {
        match self.kind() {
            TypeKind::Scalar(s) => Some((s, 1)),
            TypeKind::Tuple(s, n) => Some((s, n)),
            TypeKind::Array { .. } => None,
        }
    }

    /// The element scalar type of a scalar, tuple or array.
    pub fn elem_scalar(self) -> ScalarType {
        match self.kind() {
            TypeKind::Scalar(s) | TypeKind::Tuple(s, _) => s,
            TypeKind::Array { elem, .. } => elem,
        }
    }

    /// The same shape with a different element scalar (`<3 x f32>` → `<3 x bool>`).
    /// Arrays are returned unchanged.
    pub fn with_elem(self, s: ScalarType) -> Type {
        match self.kind() {
            TypeKind::Scalar(_) => Type::scalar(s),
            TypeKind::Tuple(_, n) => Type::intern(TypeKind::Tuple(s, n)),
            TypeKind::Array { .. } => self,
        }
    }

    /// True for scalars and tuples (values an op can compute on).
    pub fn is_value(self) -> bool {
        !self.is_array()
    }

    /// True for array types.
    pub fn is_array(self) -> bool {
        matches!(self.kind(), TypeKind::Array { .. })
    }

    /// For an array type: (dims, element type, boundary).
    pub fn array_parts(self) -> Option<(u8, Type, Boundary)> {
        match self.kind() {
            TypeKind::Array {
                dims,
                elem,
                lanes,
                boundary,
            } => Some((dims, Type::tuple(elem, lanes)?, boundary)),
            _ => None,
        }
    }
}

impl fmt::Debug for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind() {
            TypeKind::Scalar(s) => write!(f, "{s}"),
            TypeKind::Tuple(s, n) => write!(f, "<{n} x {s}>"),
            TypeKind::Array {
                dims,
                elem,
                lanes,
                boundary,
            } => {
                let et = Type::tuple(elem, lanes).ok_or(fmt::Error)?;
                write!(f, "array<{dims} x {et}, ")?;
                match boundary {
                    Boundary::Clamp => write!(f, "clamp>"),
                    Boundary::Repeat => write!(f, "repeat>"),
                    Boundary::Constant(bits) => {
                        let c = crate::Const::from_lanes(et, &bits[..lanes as usize]);
                        write!(f, "constant({c})>")
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod handle_tests {
    use super::*;

    #[test]
    fn scalar_handles_match_the_interner() {
        for s in ScalarType::ALL {
            let t = Type::scalar(s);
            assert_eq!(t, Type::intern(TypeKind::Scalar(s)));
            assert_eq!(t.kind(), TypeKind::Scalar(s));
        }
        let v = Type::tuple(ScalarType::F32, 3).expect("tuple");
        assert_eq!(v.lanes(), Some((ScalarType::F32, 3)));
    }
}
