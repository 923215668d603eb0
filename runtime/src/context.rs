//! The context block of one launch (docs/abi.md): the words a compiled kernel reads its
//! parameters, outputs and launch shape from, written in one place for the CPU and CUDA
//! devices from the kernel's [`Layout`].

use crate::planes::uniform_words;
use weft_ir::abi::Layout;
use weft_ir::Const;

/// A context block being filled for a kernel of `layout`.
pub(crate) struct Context<'l> {
    layout: &'l Layout,
    /// The words, `layout.words` of them (0 where nothing was written).
    pub(crate) words: Vec<u64>,
}

impl<'l> Context<'l> {
    /// An all-zero block for `layout`.
    pub(crate) fn new(layout: &'l Layout) -> Context<'l> {
        Context {
            layout,
            words: vec![0; layout.words],
        }
    }

    /// Uniform parameter `param`'s value: one word per lane (storage bits).
    pub(crate) fn uniform(&mut self, param: usize, c: &Const) {
        let w = self.layout.params[param];
        for (l, word) in uniform_words(c).enumerate() {
            self.words[w + l] = word;
        }
    }

    /// Varying, array or buffer parameter `param`'s plane addresses, one per tuple lane.
    pub(crate) fn planes(&mut self, param: usize, ptrs: impl IntoIterator<Item = u64>) {
        let w = self.layout.params[param];
        for (l, p) in ptrs.into_iter().enumerate() {
            self.words[w + l] = p;
        }
    }

    /// Array or buffer parameter `param`'s extents (after its `lanes` plane addresses).
    pub(crate) fn extents(&mut self, param: usize, lanes: usize, shape: &[usize]) {
        let w = self.layout.params[param] + lanes;
        for (k, &d) in shape.iter().enumerate() {
            self.words[w + k] = d as u64;
        }
    }

    /// Output `k`'s plane addresses, one per tuple lane.
    pub(crate) fn output(&mut self, k: usize, ptrs: impl IntoIterator<Item = u64>) {
        let w = self.layout.outputs[k];
        for (l, p) in ptrs.into_iter().enumerate() {
            self.words[w + l] = p;
        }
    }

    /// The launch words of a map program: its rank and extents (outermost first).
    pub(crate) fn launch(&mut self, shape: &[usize]) {
        let w = self.layout.launch;
        self.words[w] = shape.len() as u64;
        for (k, &d) in shape.iter().enumerate() {
            self.words[w + 1 + k] = d as u64;
        }
    }

    /// The launch words of a kernel: rank 3 and the work-groups on x, y and z.
    pub(crate) fn grid(&mut self, groups: [u32; 3]) {
        let w = self.layout.launch;
        self.words[w] = 3;
        for (k, &g) in groups.iter().enumerate() {
            self.words[w + 1 + k] = g as u64;
        }
    }
}
