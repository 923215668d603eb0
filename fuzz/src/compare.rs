//! Comparing and printing results: bit equality with any NaN equal to any NaN (DESIGN §3),
//! and values and arrays in the run-line syntax of filetests.

use weft_ir::konst::{canon, lane_f64};
use weft_ir::{Const, HostArray, Type};

/// Bitwise equality of lanes of type `ty`, except that any NaN equals any NaN.
pub fn same_bits(ty: Type, a: &[u64], b: &[u64]) -> bool {
    let s = ty.elem_scalar();
    a.len() == b.len()
        && a.iter().zip(b).all(|(&x, &y)| {
            canon(s, x) == canon(s, y)
                || (s.is_float() && lane_f64(s, x).is_nan() && lane_f64(s, y).is_nan())
        })
}

/// Arrays of one shape and element type whose lanes are [`same_bits`].
pub fn same_array(a: &HostArray, b: &HostArray) -> bool {
    a.elem == b.elem && a.shape == b.shape && same_bits(a.elem, &a.data, &b.data)
}

/// A value in run-line syntax (`1.5`, `-3`, `<1, 2>`, `nan`).
pub fn fmt_value(c: &Const) -> String {
    c.to_string()
}

/// An array in run-line syntax, nested by axis: `[[1, 2], [3, 4]]`.
pub fn fmt_array(a: &HostArray) -> String {
    fn rec(a: &HostArray, axis: usize, base: usize, stride: usize) -> String {
        let n = a.shape[axis];
        let inner = stride / n.max(1);
        let parts: Vec<String> = (0..n)
            .map(|i| {
                if axis + 1 == a.shape.len() {
                    fmt_value(&a.get(base + i))
                } else {
                    rec(a, axis + 1, base + i * inner, inner)
                }
            })
            .collect();
        format!("[{}]", parts.join(", "))
    }
    rec(a, 0, 0, a.len())
}
