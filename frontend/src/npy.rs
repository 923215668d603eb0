//! `.npy` files to and from interpreter arrays (through `npyz`); a tuple element type's
//! lanes are the trailing axis (an array of `<3 x f32>` of shape (n) is an npy of shape (n, 3)).

use half::f16;
use npyz::WriterBuilder;
use std::io::BufWriter;
use std::path::Path;
use weft_ir::{HostArray, ScalarType, Type};

/// An npy file read into lanes of canonical bits, with its scalar type and full shape.
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

/// Reads an npy file (C order, any supported dtype, either byte order).
pub fn read_npy(path: &Path) -> Result<NpyData, NpyError> {
    let bytes = std::fs::read(path).map_err(|e| err(path, e.to_string()))?;
    let npy = npyz::NpyFile::new(&bytes[..])
        .map_err(|e| err(path, format!("not a valid .npy file: {e}")))?;
    if npy.order() == npyz::Order::Fortran {
        return Err(err(
            path,
            "Fortran-ordered arrays are not supported; save with C order",
        ));
    }
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let descr = match npy.dtype() {
        npyz::DType::Plain(ts) => ts.to_string(),
        other => return Err(err(path, format!("unsupported dtype {}", other.descr()))),
    };
    let code = descr.get(1..).unwrap_or("");
    let scalar = ScalarType::ALL
        .into_iter()
        .find(|&s| dtype_str(s) == code)
        .ok_or_else(|| err(path, format!("unsupported dtype {descr}")))?;
    let io = |e: std::io::Error| err(path, format!("reading data: {e}"));
    let data: Vec<u64> = match scalar {
        ScalarType::Bool => npy
            .into_vec::<bool>()
            .map_err(io)?
            .into_iter()
            .map(u64::from)
            .collect(),
        ScalarType::I8 => npy
            .into_vec::<i8>()
            .map_err(io)?
            .into_iter()
            .map(|x| x as u8 as u64)
            .collect(),
        ScalarType::I16 => npy
            .into_vec::<i16>()
            .map_err(io)?
            .into_iter()
            .map(|x| x as u16 as u64)
            .collect(),
        ScalarType::I32 => npy
            .into_vec::<i32>()
            .map_err(io)?
            .into_iter()
            .map(|x| x as u32 as u64)
            .collect(),
        ScalarType::I64 => npy
            .into_vec::<i64>()
            .map_err(io)?
            .into_iter()
            .map(|x| x as u64)
            .collect(),
        ScalarType::U8 => npy
            .into_vec::<u8>()
            .map_err(io)?
            .into_iter()
            .map(u64::from)
            .collect(),
        ScalarType::U16 => npy
            .into_vec::<u16>()
            .map_err(io)?
            .into_iter()
            .map(u64::from)
            .collect(),
        ScalarType::U32 => npy
            .into_vec::<u32>()
            .map_err(io)?
            .into_iter()
            .map(u64::from)
            .collect(),
        ScalarType::U64 => npy.into_vec::<u64>().map_err(io)?,
        ScalarType::F16 => npy
            .into_vec::<f16>()
            .map_err(io)?
            .into_iter()
            .map(|x| x.to_bits() as u64)
            .collect(),
        ScalarType::F32 => npy
            .into_vec::<f32>()
            .map_err(io)?
            .into_iter()
            .map(|x| x.to_bits() as u64)
            .collect(),
        ScalarType::F64 => npy
            .into_vec::<f64>()
            .map_err(io)?
            .into_iter()
            .map(f64::to_bits)
            .collect(),
    };
    Ok(NpyData {
        scalar,
        shape,
        data,
    })
}

/// Interprets npy data as an array of element type `elem` (scalar or tuple) with `dims` axes
/// (`None`: 1 to 3 axes). Errors say what was expected.
pub fn to_host_array(d: NpyData, elem: Type, dims: Option<usize>) -> Result<HostArray, String> {
    let (s, lanes) = elem.lanes().ok_or("array of arrays")?;
    if d.scalar != s {
        return Err(format!(
            "expects dtype {} ({s}), got {} ({})",
            dtype_str(s),
            dtype_str(d.scalar),
            d.scalar
        ));
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

/// Writes an array as npy (little-endian; tuple lanes as a trailing axis).
pub fn write_npy(path: &Path, a: &HostArray) -> Result<(), NpyError> {
    let (s, lanes) = a
        .elem
        .lanes()
        .ok_or_else(|| err(path, "cannot write an array of arrays"))?;
    let mut shape: Vec<u64> = a.shape.iter().map(|&x| x as u64).collect();
    if lanes > 1 {
        shape.push(lanes as u64);
    }
    let file = std::fs::File::create(path).map_err(|e| err(path, e.to_string()))?;
    let w = BufWriter::new(file);
    let io = |e: std::io::Error| err(path, e.to_string());
    macro_rules! put {
        ($t:ty, $conv:expr) => {{
            let mut wr = npyz::WriteOptions::<$t>::new()
                .default_dtype()
                .shape(&shape)
                .writer(w)
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
