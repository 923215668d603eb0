//! Unit tests of the passes on the algebra example programs (examples/ir/algebra).

use super::fold::{fold_program, Known};
use super::*;
use crate::host::HostArray;
use crate::konst::Const;
use crate::{parse_module, print_module, verify_module};

fn module(src: &str) -> Module {
    let m = parse_module(src).expect("parses");
    verify_module(&m).expect("verifies");
    m
}

#[test]
fn sparse_mask_folds_to_its_nonzero_taps() {
    let m = module(include_str!("../../../examples/ir/algebra/conv.weft"));
    let mut p = m.programs[0].clone();
    // A 5x5 ring: 8 nonzero taps.
    let mut mask = HostArray::zeros(crate::Type::scalar(crate::ScalarType::F32), &[5, 5]);
    for (y, x) in [
        (0, 2),
        (4, 2),
        (2, 0),
        (2, 4),
        (1, 1),
        (1, 3),
        (3, 1),
        (3, 3),
    ] {
        mask.data[y * 5 + x] = 1.5f32.to_bits() as u64;
    }
    let mv = p.params[1].value;
    let mut known = Known::default();
    known.arrays.insert(mv, &mask);
    fold_program(&mut p, &known);
    let mut m2 = Module { programs: vec![p] };
    run_pipeline(&mut m2, "cse,dce").unwrap();
    let text = print_module(&m2);
    if std::env::var("SHOW").is_ok() {
        eprintln!("{text}");
    }
    let muls = util::count_ops(&m2.programs[0], crate::Opcode::Mul);
    assert_eq!(muls, 8, "{text}");
    assert_eq!(util::count_ops(&m2.programs[0], crate::Opcode::For), 0);
    let _ = Const::f32(0.0);
}

#[test]
fn default_pipeline_keeps_examples_verified() {
    for src in [
        include_str!("../../../examples/ir/algebra/particles.weft"),
        include_str!("../../../examples/ir/algebra/stats.weft"),
        include_str!("../../../examples/ir/algebra/adapt.weft"),
        include_str!("../../../examples/ir/algebra/conv.weft"),
    ] {
        let mut m = module(src);
        run_pipeline(&mut m, "inline,fold,cse,licm,dce,lift-uniforms").unwrap();
        let text = print_module(&m);
        let back = parse_module(&text).unwrap();
        assert_eq!(print_module(&back), text);
    }
}
