//! `.npy` files to and from interpreter arrays (through `npyz`); a tuple element type's
//! lanes are the trailing axis (an array of `<3 x f32>` of shape (n) is an npy of shape (n, 3)).

use half::f16;
use npyz::WriterBuilder;
use std::io::{BufReader, Read, Write};
use std::path::Path;
use weft_ir::{HostArray, ScalarType, Type};

/// An npy file read into lanes of canonical bits, with its scalar type and full shape.
/// [`read_npy`] guarantees `data.len()` is the product of `shape`, and that the product of
/// its non-zero extents (times the item size) is at most 2^63 - 1 bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpyData {
    /// Element scalar type from the file's dtype.
    pub scalar: ScalarType,
    /// The file's shape (including any trailing lanes axis).
    pub shape: Vec<usize>,
    /// Values as canonical lane bits.
    pub data: Vec<u64>,
}

/// Errors reading or writing npy files; messages name the file.
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    /// I/O or format error.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
}

fn err(path: &Path, message: impl Into<String>) -> NpyError {
    NpyError::File {
        path: path.display().to_string(),
        message: message.into(),
    }
}

/// numpy's name of the dtype of `s` (`float32`, `int64`, `bool`, …), as in `np.float32`.
pub fn numpy_name(s: ScalarType) -> &'static str {
    match s {
        ScalarType::Bool => "bool",
        ScalarType::I8 => "int8",
        ScalarType::I16 => "int16",
        ScalarType::I32 => "int32",
        ScalarType::I64 => "int64",
        ScalarType::U8 => "uint8",
        ScalarType::U16 => "uint16",
        ScalarType::U32 => "uint32",
        ScalarType::U64 => "uint64",
        ScalarType::F16 => "float16",
        ScalarType::F32 => "float32",
        ScalarType::F64 => "float64",
    }
}

/// The numpy dtype string (without byte order) of a scalar type.
pub fn dtype_str(s: ScalarType) -> &'static str {
    match s {
        ScalarType::Bool => "b1",
        ScalarType::I8 => "i1",
        ScalarType::I16 => "i2",
        ScalarType::I32 => "i4",
        ScalarType::I64 => "i8",
        ScalarType::U8 => "u1",
        ScalarType::U16 => "u2",
        ScalarType::U32 => "u4",
        ScalarType::U64 => "u8",
        ScalarType::F16 => "f2",
        ScalarType::F32 => "f4",
        ScalarType::F64 => "f8",
    }
}

/// The longest `.npy` header weft reads (numpy's own `np.load` reads at most 10,000
/// bytes unless told otherwise).
pub const MAX_HEADER_BYTES: u64 = 1 << 20;

/// How deep the header's Python literal may nest (a dict of a tuple is 2).
const MAX_HEADER_DEPTH: usize = 32;

/// Reads an npy file (C or Fortran order, any supported dtype, either byte order); the data
/// comes back in C order (a Fortran-ordered file is transposed while read).
///
/// The file must be a regular file ([`crate::data::open_regular`]: a FIFO or `/dev/zero`
/// is refused before reading). The header is parsed first and checked against the file's
/// size before any data is allocated: the element count (the product of the shape, in
/// checked arithmetic) times the item size must be exactly the number of data bytes the
/// file holds. On success, `data.len()` is the product of `shape`.
///
/// Errors (each names the file): not a regular file; no `\x93NUMPY` magic; an unsupported
/// version, a header longer than the file or than [`MAX_HEADER_BYTES`]; a header that is
/// not a dict with `descr`, `fortran_order` and `shape`; an unsupported dtype; a
/// negative dimension; `the header claims shape (…) = N elements (M bytes) but
/// the file has K data bytes`; non-zero dimensions whose product exceeds 2^63 bytes (even
/// in an empty array); a bool that is not 0 or 1; the memory cannot be allocated.
pub fn read_npy(path: &Path) -> Result<NpyData, NpyError> {
    let (file, len) = crate::data::open_regular(path).map_err(|m| err(path, m))?;
    read_npy_from(BufReader::new(file), len).map_err(|m| err(path, m))
}

/// [`read_npy`] of the bytes of an npy file in memory (the same parser and checks).
///
/// Errors: as [`read_npy`], without the file name.
pub fn read_npy_bytes(bytes: &[u8]) -> Result<NpyData, String> {
    read_npy_from(bytes, bytes.len() as u64)
}

/// Reads an npy file of `len` bytes from `r` (which must not hold fewer; more is ignored).
fn read_npy_from(r: impl Read, len: u64) -> Result<NpyData, String> {
    let mut r = r.take(len);
    let mut pre = [0u8; 8];
    if len < 8 || r.read_exact(&mut pre).is_err() || &pre[..6] != b"\x93NUMPY" {
        return Err("not a valid .npy file: it does not start with the \\x93NUMPY magic".into());
    }
    let (major, minor) = (pre[6], pre[7]);
    let header_len = match major {
        1 => {
            let mut b = [0u8; 2];
            r.read_exact(&mut b)
                .map_err(|_| "not a valid .npy file: it ends inside the header".to_string())?;
            u16::from_le_bytes(b) as u64
        }
        2 | 3 => {
            let mut b = [0u8; 4];
            r.read_exact(&mut b)
                .map_err(|_| "not a valid .npy file: it ends inside the header".to_string())?;
            u32::from_le_bytes(b) as u64
        }
        _ => {
            return Err(format!(
                "not a valid .npy file: unsupported format version {major}.{minor}"
            ))
        }
    };
    let prefix = if major == 1 { 10 } else { 12 };
    let rest = len - prefix;
    if header_len > rest {
        return Err(format!(
            "not a valid .npy file: the header claims {header_len} bytes but the file has \
             only {rest} after the magic"
        ));
    }
    if header_len > MAX_HEADER_BYTES {
        return Err(format!(
            "the header is {header_len} bytes long; weft reads headers of at most \
             {MAX_HEADER_BYTES} bytes"
        ));
    }
    let mut text = vec![0u8; header_len as usize];
    r.read_exact(&mut text)
        .map_err(|e| format!("reading the header: {e}"))?;
    let text = std::str::from_utf8(&text)
        .map_err(|_| "not a valid .npy file: the header is not text".to_string())?;
    let header = parse_header(text).map_err(|m| format!("not a valid .npy file: {m}"))?;
    let data_bytes = rest - header_len;
    let count = header.count.ok_or_else(|| {
        format!(
            "the header claims shape {}, more than 2^128 elements, but the file has \
             {data_bytes} data bytes",
            header.shape_text
        )
    })?;
    let size = header.scalar.bytes();
    let bytes = count.checked_mul(size as u128);
    if bytes != Some(data_bytes as u128) {
        let b = bytes.map_or("more than 2^128".into(), |b| b.to_string());
        return Err(format!(
            "the header claims shape {} = {count} elements ({b} bytes) but the file has \
             {data_bytes} data bytes",
            header.shape_text
        ));
    }
    // Like numpy, refuse shapes whose non-zero dimensions overflow even when a zero makes
    // the array empty: extents and strides computed from them would overflow downstream.
    let nonzero = header
        .shape
        .iter()
        .filter(|&&d| d != 0)
        .try_fold(size as u128, |c, &d| c.checked_mul(d as u128));
    if nonzero.is_none_or(|b| b > isize::MAX as u128) {
        return Err(format!(
            "the header claims shape {}: its non-zero dimensions make more than 2^63 bytes \
             (numpy refuses such arrays too)",
            header.shape_text
        ));
    }
    // `count * size == data_bytes <= u64::MAX`, so these fit.
    let count = count as usize;
    let shape: Vec<usize> = header.shape.iter().map(|&d| d as usize).collect();
    let mut data: Vec<u64> = Vec::new();
    data.try_reserve_exact(count)
        .map_err(|_| format!("cannot allocate memory for {count} elements"))?;
    let mut chunk = vec![0u8; size * 8192];
    let mut left = count;
    while left > 0 {
        let n = left.min(8192);
        let buf = &mut chunk[..n * size];
        r.read_exact(buf).map_err(|e| {
            format!(
                "reading data: {e} after {} of {count} elements (did the file change?)",
                count - left
            )
        })?;
        for item in buf.chunks_exact(size) {
            let mut x = 0u64;
            if header.big_endian {
                for &b in item {
                    x = x << 8 | b as u64;
                }
            } else {
                for &b in item.iter().rev() {
                    x = x << 8 | b as u64;
                }
            }
            if header.scalar == ScalarType::Bool && x > 1 {
                return Err(format!(
                    "element {} is not a bool: byte {x} (numpy writes 0 or 1)",
                    data.len()
                ));
            }
            data.push(x);
        }
        left -= n;
    }
    if header.fortran && shape.len() > 1 {
        data = fortran_to_c(&shape, &data);
    }
    Ok(NpyData {
        scalar: header.scalar,
        shape,
        data,
    })
}

/// The elements of a Fortran-ordered (first axis fastest) array of `shape` in C order
/// (last axis fastest).
fn fortran_to_c(shape: &[usize], f: &[u64]) -> Vec<u64> {
    let mut c = Vec::with_capacity(f.len());
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..f.len() {
        // Offset of `idx` in Fortran order.
        let mut off = 0;
        for (&i, &n) in idx.iter().zip(shape).rev() {
            off = off * n + i;
        }
        c.push(f[off]);
        // Next C-order index: the last axis fastest.
        for (i, &n) in idx.iter_mut().zip(shape).rev() {
            *i += 1;
            if *i < n {
                break;
            }
            *i = 0;
        }
    }
    c
}

/// An npy header's contents.
struct Header {
    scalar: ScalarType,
    big_endian: bool,
    fortran: bool,
    shape: Vec<u64>,
    /// The shape as numpy prints it, e.g. `(3, 4)` or `(5,)`.
    shape_text: String,
    /// The product of `shape`, `None` when it exceeds `u128`.
    count: Option<u128>,
}

/// A Python literal of an npy header.
#[derive(Debug)]
enum Lit {
    Str(String),
    Bool(bool),
    None,
    /// An integer: its sign and magnitude (`None`: more than 128 bits).
    Int(bool, Option<u128>),
    Seq(Vec<Lit>),
    Dict(Vec<(Lit, Lit)>),
}

/// Parses an npy header (`{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }`).
fn parse_header(text: &str) -> Result<Header, String> {
    let mut p = LitParser {
        s: text.as_bytes(),
        i: 0,
    };
    let lit = p.value(0)?;
    p.ws();
    if p.i != p.s.len() {
        return Err(format!(
            "unexpected text after the header's dict at byte {}",
            p.i
        ));
    }
    let Lit::Dict(entries) = lit else {
        return Err("the header is not a dict".into());
    };
    let get = |key: &str| {
        entries
            .iter()
            .find(|(k, _)| matches!(k, Lit::Str(s) if s == key))
            .map(|(_, v)| v)
            .ok_or_else(|| format!("the header has no '{key}'"))
    };
    let descr = match get("descr")? {
        Lit::Str(s) => s.clone(),
        _ => return Err("unsupported dtype: a structured dtype (weft reads plain arrays)".into()),
    };
    let fortran = match get("fortran_order")? {
        Lit::Bool(b) => *b,
        _ => return Err("'fortran_order' is not True or False".into()),
    };
    let Lit::Seq(dims) = get("shape")? else {
        return Err("'shape' is not a tuple".into());
    };
    let mut shape = Vec::new();
    let mut count = Some(1u128);
    for d in dims {
        match d {
            Lit::Int(true, m) if *m != Some(0) => {
                return Err(format!(
                    "the shape has a negative dimension (-{})",
                    m.map_or("…".into(), |m| m.to_string())
                ))
            }
            Lit::Int(_, Some(m)) if *m <= u64::MAX as u128 => {
                shape.push(*m as u64);
                count = count.and_then(|c| c.checked_mul(*m));
            }
            Lit::Int(..) => return Err("a dimension of the shape does not fit in 64 bits".into()),
            _ => return Err("'shape' is not a tuple of integers".into()),
        }
    }
    let shape_text = match shape.as_slice() {
        [d] => format!("({d},)"),
        s => format!(
            "({})",
            s.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
        ),
    };
    let (order, code) = descr.split_at(descr.chars().next().map_or(0, char::len_utf8));
    let scalar = ScalarType::ALL
        .into_iter()
        .find(|&s| dtype_str(s) == code)
        .ok_or_else(|| format!("unsupported dtype '{descr}'"))?;
    let big_endian = match (order, scalar.bytes()) {
        ("<", _) => false,
        (">", _) => true,
        ("=", _) => cfg!(target_endian = "big"),
        ("|", 1) => false,
        _ => return Err(format!("unsupported dtype '{descr}'")),
    };
    Ok(Header {
        scalar,
        big_endian,
        fortran,
        shape,
        shape_text,
        count,
    })
}

/// A recursive-descent parser of the Python literals npy headers hold (depth-bounded).
struct LitParser<'a> {
    s: &'a [u8],
    i: usize,
}

impl LitParser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }

    fn value(&mut self, depth: usize) -> Result<Lit, String> {
        if depth > MAX_HEADER_DEPTH {
            return Err(format!("the header nests deeper than {MAX_HEADER_DEPTH}"));
        }
        let at = self.i;
        match self.peek() {
            None => Err("the header ends early".into()),
            Some(b'{') => {
                self.i += 1;
                let mut entries = Vec::new();
                loop {
                    if self.peek() == Some(b'}') {
                        self.i += 1;
                        return Ok(Lit::Dict(entries));
                    }
                    let k = self.value(depth + 1)?;
                    if self.peek() != Some(b':') {
                        return Err(format!("expected `:` at byte {}", self.i));
                    }
                    self.i += 1;
                    let v = self.value(depth + 1)?;
                    entries.push((k, v));
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {}
                        _ => return Err(format!("expected `,` or `}}` at byte {}", self.i)),
                    }
                }
            }
            Some(open @ (b'(' | b'[')) => {
                let close = if open == b'(' { b')' } else { b']' };
                self.i += 1;
                let mut items = Vec::new();
                loop {
                    if self.peek() == Some(close) {
                        self.i += 1;
                        return Ok(Lit::Seq(items));
                    }
                    items.push(self.value(depth + 1)?);
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(c) if c == close => {}
                        _ => {
                            return Err(format!(
                                "expected `,` or `{}` at byte {}",
                                close as char, self.i
                            ))
                        }
                    }
                }
            }
            Some(q @ (b'\'' | b'"')) => {
                self.i += 1;
                let mut out = Vec::new();
                loop {
                    match self.s.get(self.i) {
                        None => return Err(format!("unterminated string at byte {at}")),
                        Some(&c) if c == q => {
                            self.i += 1;
                            break;
                        }
                        Some(b'\\') => {
                            let Some(&c) = self.s.get(self.i + 1) else {
                                return Err(format!("unterminated string at byte {at}"));
                            };
                            out.push(c);
                            self.i += 2;
                        }
                        Some(&c) => {
                            out.push(c);
                            self.i += 1;
                        }
                    }
                }
                Ok(Lit::Str(String::from_utf8_lossy(&out).into_owned()))
            }
            Some(c) if c == b'-' || c == b'+' || c.is_ascii_digit() => {
                let neg = c == b'-';
                if !c.is_ascii_digit() {
                    self.i += 1;
                }
                let start = self.i;
                let mut m = Some(0u128);
                while let Some(&d) = self.s.get(self.i).filter(|d| d.is_ascii_digit()) {
                    m = m
                        .and_then(|m| m.checked_mul(10))
                        .and_then(|m| m.checked_add((d - b'0') as u128));
                    self.i += 1;
                }
                if self.i == start {
                    return Err(format!("expected a number at byte {at}"));
                }
                // Python 2's numpy wrote long integers with an `L` suffix.
                if matches!(self.s.get(self.i), Some(b'L' | b'l')) {
                    self.i += 1;
                }
                Ok(Lit::Int(neg, m))
            }
            Some(c) if c.is_ascii_alphabetic() => {
                let start = self.i;
                while self
                    .s
                    .get(self.i)
                    .is_some_and(|c| c.is_ascii_alphanumeric())
                {
                    self.i += 1;
                }
                match &self.s[start..self.i] {
                    b"True" => Ok(Lit::Bool(true)),
                    b"False" => Ok(Lit::Bool(false)),
                    b"None" => Ok(Lit::None),
                    w => Err(format!(
                        "unexpected `{}` at byte {start}",
                        String::from_utf8_lossy(w)
                    )),
                }
            }
            Some(c) => Err(format!("unexpected `{}` at byte {}", c as char, self.i)),
        }
    }
}

/// Interprets npy data as an array of element type `elem` (scalar or tuple) with `dims` axes
/// (`None`: 1 to 3 axes). Errors say what was expected.
pub fn to_host_array(d: NpyData, elem: Type, dims: Option<usize>) -> Result<HostArray, String> {
    to_host_array_as(d, elem, dims, false)
}

/// [`to_host_array`], converting other dtypes to `elem`'s lanes when `cast` is true, with
/// the IR's `cast` semantics (DESIGN §3: integers wrap, float→int saturates with NaN→0,
/// int→float and float→float round to nearest even; `weft run --cast`).
///
/// Errors: as [`to_host_array`]; without `cast`, a different dtype (the message says how to
/// convert).
pub fn to_host_array_as(
    mut d: NpyData,
    elem: Type,
    dims: Option<usize>,
    cast: bool,
) -> Result<HostArray, String> {
    let (s, lanes) = elem.lanes().ok_or("array of arrays")?;
    if d.scalar != s {
        if !cast {
            return Err(format!(
                "expects dtype {} ({s}), got {} ({}): convert it (numpy: `a.astype(np.{})`) \
                 or pass --cast",
                dtype_str(s),
                dtype_str(d.scalar),
                d.scalar,
                numpy_name(s)
            ));
        }
        for x in &mut d.data {
            *x = weft_ir::interp::scalar::cast(d.scalar, s, *x);
        }
        d.scalar = s;
    }
    let mut shape = d.shape.clone();
    if lanes > 1 {
        if shape.last() != Some(&(lanes as usize)) {
            return Err(format!(
                "expects {elem} elements: a trailing axis of {lanes}, got shape {:?}",
                d.shape
            ));
        }
        shape.pop();
    }
    match dims {
        Some(n) if shape.len() != n => {
            return Err(format!(
                "expects a {n}-D array of {elem}, got shape {:?}",
                d.shape
            ))
        }
        None if !(1..=3).contains(&shape.len()) => {
            return Err(format!(
                "expects 1 to 3 axes of {elem}, got shape {:?}",
                d.shape
            ))
        }
        _ => {}
    }
    Ok(HostArray {
        elem,
        shape,
        data: d.data,
    })
}

/// Writes an array as npy (little-endian; tuple lanes as a trailing axis), atomically: to a
/// temporary file in the same directory, renamed over `path` once complete
/// ([`crate::data::write_atomic`]), so a failure (a full disk) leaves `path` as it was.
///
/// Errors (naming the file): an array of arrays; the file cannot be written.
pub fn write_npy(path: &Path, a: &HostArray) -> Result<(), NpyError> {
    crate::data::write_atomic(path, |w| write_npy_to(w, a)).map_err(|m| err(path, m))
}

/// Encodes an array as npy to `w` (see [`write_npy`]).
///
/// Errors: an array of arrays; writing fails.
pub fn write_npy_to(w: &mut dyn Write, a: &HostArray) -> Result<(), String> {
    let (s, lanes) = a.elem.lanes().ok_or("cannot write an array of arrays")?;
    let mut shape: Vec<u64> = a.shape.iter().map(|&x| x as u64).collect();
    if lanes > 1 {
        shape.push(lanes as u64);
    }
    let io = |e: std::io::Error| e.to_string();
    macro_rules! put {
        ($t:ty, $conv:expr) => {{
            let mut wr = npyz::WriteOptions::<$t>::new()
                .default_dtype()
                .shape(&shape)
                .writer(&mut *w)
                .begin_nd()
                .map_err(io)?;
            wr.extend(a.data.iter().map($conv)).map_err(io)?;
            wr.finish().map_err(io)
        }};
    }
    match s {
        ScalarType::Bool => put!(bool, |&b| b != 0),
        ScalarType::I8 => put!(i8, |&b| b as i8),
        ScalarType::I16 => put!(i16, |&b| b as i16),
        ScalarType::I32 => put!(i32, |&b| b as i32),
        ScalarType::I64 => put!(i64, |&b| b as i64),
        ScalarType::U8 => put!(u8, |&b| b as u8),
        ScalarType::U16 => put!(u16, |&b| b as u16),
        ScalarType::U32 => put!(u32, |&b| b as u32),
        ScalarType::U64 => put!(u64, |&b| b),
        ScalarType::F16 => put!(f16, |&b| f16::from_bits(b as u16)),
        ScalarType::F32 => put!(f32, |&b| f32::from_bits(b as u32)),
        ScalarType::F64 => put!(f64, |&b| f64::from_bits(b)),
    }
}
