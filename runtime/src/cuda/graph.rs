//! Bound launches and CUDA graphs for replayed launch sequences (issue 23): a launch bound
//! once to an argument signature ([`CudaDevice::bind`]) only places buffer addresses in its
//! parameter words per replay ([`CudaDevice::bound_words`]); a sequence of them runs as one
//! CUDA graph, a chain of kernel nodes built and instantiated at the first replay and
//! updated with `cuGraphExecKernelNodeSetParams` when a node's words change
//! ([`CudaDevice::launch_graph`]).

use super::*;

/// Graph executables a replayed sequence keeps ([`CudaDevice::launch_graph`]).
pub(crate) const GRAPHS_KEPT: usize = 4;

/// A launch of one program bound to one argument signature on a CUDA device (see the module
/// docs).
pub struct CudaBoundLaunch {
    kernel: Arc<CudaKernel>,
    name: String,
    /// The parameter words with everything but the plane addresses of arrays and outputs.
    words: Vec<u64>,
    arrays: Vec<Option<crate::plan::BoundArray>>,
    /// The outputs' element types and first words.
    outs: Vec<(Type, usize)>,
    n: usize,
    shape: Vec<usize>,
    block: u32,
    grid: u32,
}

impl CudaBoundLaunch {
    /// The launch shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The number of elements launched (0: no kernel runs).
    pub fn len(&self) -> usize {
        self.n
    }

    /// True for a launch of no elements.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
}

/// One replay's launches as an instantiated CUDA graph: a chain of kernel nodes in launch
/// order. Made and updated by [`CudaDevice::launch_graph`]; destroyed when dropped.
pub struct CudaGraphExec {
    dev: Arc<Inner>,
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
    /// The kernel node of each launch (`None` for launches of no elements).
    nodes: Vec<Option<sys::CUgraphNode>>,
    /// Each node's parameter words as last set.
    words: Vec<Vec<u64>>,
}

// SAFETY: the graph and its executable are only used through `&mut CudaGraphExec` (one
// thread at a time, as the driver requires) with the device's context bound.
unsafe impl Send for CudaGraphExec {}

impl Drop for CudaGraphExec {
    fn drop(&mut self) {
        let (exec, graph) = (self.exec, self.graph);
        let _ = guard("cuGraphExecDestroy", || {
            self.dev.bind()?;
            // SAFETY: made by `launch_graph`, destroyed once, here; queued launches of the
            // executable finish first (the driver defers the release).
            unsafe {
                let _ = result::graph::exec_destroy(exec);
                let _ = result::graph::destroy(graph);
            }
            Ok(())
        });
    }
}

/// Kernel node parameters for `words` (then `begin`, `end`), pointing into `ptrs`' storage.
fn node_params(
    b: &CudaBoundLaunch,
    words: &[u64],
    range: &[i64; 2],
    ptrs: &mut smallvec::SmallVec<[*mut c_void; 64]>,
) -> sys::CUDA_KERNEL_NODE_PARAMS {
    ptrs.clear();
    ptrs.extend(
        words
            .iter()
            .map(|w| (w as *const u64).cast_mut().cast::<c_void>()),
    );
    ptrs.extend(
        range
            .iter()
            .map(|w| (w as *const i64).cast_mut().cast::<c_void>()),
    );
    // SAFETY: a plain C struct; every field not set below is a null pointer or zero, which
    // the driver reads as "none" (`kern` and `ctx` unused when `func` is given).
    let mut p: sys::CUDA_KERNEL_NODE_PARAMS = unsafe { std::mem::zeroed() };
    p.func = b.kernel.module.func;
    p.gridDimX = b.grid;
    p.gridDimY = 1;
    p.gridDimZ = 1;
    p.blockDimX = b.block;
    p.blockDimY = 1;
    p.blockDimZ = 1;
    p.kernelParams = ptrs.as_mut_ptr();
    p
}

fn check(call: &'static str, r: sys::CUresult) -> Result<(), CudaError> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(drv(call, DriverError(r)))
    }
}

impl CudaDevice {
    /// Binds a launch of `prog` to the signature of `args` and `shape` (the buffers are
    /// only looked at for their types and shapes). `None` when an argument is an array of
    /// 16-byte tuples that a launch repacks (docs/abi.md): such launches are not bound.
    ///
    /// # Errors
    /// As [`CudaDevice::launch_buffers_prepared`].
    pub fn bind(
        &self,
        prog: &CudaProgram,
        args: &[CudaArg],
        shape: Option<&[usize]>,
    ) -> Result<Option<CudaBoundLaunch>, RuntimeError> {
        let p = prog.prepared.program();
        for (par, a) in p.params.iter().zip(args) {
            if let CudaArg::Array { buf, .. } = a {
                if packed(par.kind, buf.elem) {
                    return Ok(None);
                }
            }
        }
        // The general path checks everything a launch of this signature needs.
        let l = self.launch_buffers_prepared(prog, args, shape)?;
        let layout = &prog.kernel.layout;
        let mut words = l.launch.words.clone();
        let arrays = crate::plan::bound_arrays(
            p,
            layout,
            &mut words,
            args.iter().map(|a| match a {
                CudaArg::Array { buf, shape, .. } => Some((buf.elem, buf.lanes(), &shape[..])),
                CudaArg::Uniform(_) => None,
            }),
        );
        let outs = crate::plan::bound_outputs(p, layout);
        Ok(Some(CudaBoundLaunch {
            kernel: prog.kernel.clone(),
            name: p.name.clone(),
            words,
            arrays,
            outs,
            n: l.launch.n,
            shape: l.launch.shape.clone(),
            block: l.launch.block,
            grid: l.launch.grid,
        }))
    }

    /// Appends to `all` the parameter words of bound launch `b` over `bufs` (one per
    /// parameter: `Some((buffer, offset))` for each array, `None` for each uniform) and
    /// returns its output buffers, allocated here (from the device's pool; written by the
    /// launch). A replay's launches append to one vector (one allocation per replay).
    ///
    /// # Errors
    /// A buffer of another device or element type than bound, or too short for the elements
    /// read (named); an allocation failing.
    pub fn bound_words(
        &self,
        b: &CudaBoundLaunch,
        bufs: &[Option<(&CudaBuffer, usize)>],
        all: &mut Vec<u64>,
    ) -> Result<smallvec::SmallVec<[CudaBuffer; 4]>, RuntimeError> {
        let i = &self.inner;
        let at = all.len();
        all.extend_from_slice(&b.words);
        let words = &mut all[at..];
        for (a, buf) in b.arrays.iter().zip(bufs) {
            let (Some(a), Some((buf, offset))) = (a, buf) else {
                continue;
            };
            if !buf.dev.same_gpu(i) {
                return Err(RunError::BadInput {
                    program: b.name.clone(),
                    param: a.param.clone(),
                    message: "a buffer of another device".into(),
                }
                .into());
            }
            crate::plan::check_bound(
                (&b.name, &a.param),
                (a.elem, a.len),
                (buf.elem, *offset, buf.len),
            )?;
            let lb = buf.lane_bytes();
            for l in 0..buf.lanes() {
                words[a.word + l] = buf.buf.ptr + ((l * buf.stride + offset) * lb) as u64;
            }
        }
        let n = b.n;
        let mut outs = smallvec::SmallVec::new();
        // No context to bind: a pooled allocation needs none, and cudarc binds before a
        // fresh one.
        for &(ty, w) in &b.outs {
            let d = guard("cuMemAlloc", || i.alloc(HostBuffer::bytes_for(ty, n)))?;
            let out = CudaBuffer {
                dev: i.clone(),
                buf: Arc::new(d),
                elem: ty,
                len: n,
                stride: HostBuffer::stride_for(n),
            };
            for l in 0..out.lanes() {
                words[w + l] = out.buf.ptr + (l * out.stride * out.lane_bytes()) as u64;
            }
            outs.push(out);
        }
        Ok(outs)
    }

    /// The number of parameter words [`CudaDevice::bound_words`] appends for `b`.
    pub fn bound_word_count(b: &CudaBoundLaunch) -> usize {
        b.words.len()
    }

    /// Queues `launches` (bound launches with their words from [`CudaDevice::bound_words`])
    /// as one CUDA graph on the device's stream. `graphs` holds the executables of earlier
    /// replays (at most `GRAPHS_KEPT`, 4): one whose nodes have exactly these words is
    /// launched as it is (a loop's buffers come back from the pool in a short cycle);
    /// otherwise a new one is built while fewer are kept, else the least recently used one's
    /// changed nodes are updated. No synchronisation.
    ///
    /// # Errors
    /// A driver call failing (named).
    pub fn launch_graph(
        &self,
        graphs: &mut Vec<CudaGraphExec>,
        launches: &[(&CudaBoundLaunch, &[u64])],
    ) -> Result<(), RuntimeError> {
        let i = &self.inner;
        graphs.retain(|g| g.nodes.len() == launches.len());
        guard("cuGraphLaunch", || {
            i.bind()?;
            let same = |g: &CudaGraphExec| {
                g.words
                    .iter()
                    .zip(launches)
                    .all(|(w, (_, words))| w[..] == words[..])
            };
            // Most recently used last.
            let at = match graphs.iter().position(same) {
                Some(k) => k,
                None if graphs.len() < GRAPHS_KEPT => {
                    graphs.push(self.build_graph(launches)?);
                    graphs.len() - 1
                }
                None => {
                    let g = &mut graphs[0];
                    let mut ptrs = smallvec::SmallVec::new();
                    for (k, (b, words)) in launches.iter().enumerate() {
                        let Some(node) = g.nodes[k] else { continue };
                        if g.words[k][..] == words[..] {
                            continue;
                        }
                        let range = [0i64, b.n as i64];
                        let p = node_params(b, words, &range, &mut ptrs);
                        // SAFETY: `node` belongs to the graph `exec` was instantiated from;
                        // the parameters point at live words, copied by the call.
                        check("cuGraphExecKernelNodeSetParams", unsafe {
                            sys::cuGraphExecKernelNodeSetParams_v2(g.exec, node, &p)
                        })?;
                        g.words[k].clear();
                        g.words[k].extend_from_slice(words);
                    }
                    0
                }
            };
            let g = graphs.remove(at);
            // SAFETY: a graph executable made for this context, launched on its stream.
            let r = check("cuGraphLaunch", unsafe {
                sys::cuGraphLaunch(g.exec, i.stream.cu_stream())
            });
            graphs.push(g);
            r
        })
        .map_err(Into::into)
    }

    /// A graph of `launches` as a chain of kernel nodes, instantiated.
    fn build_graph(
        &self,
        launches: &[(&CudaBoundLaunch, &[u64])],
    ) -> Result<CudaGraphExec, CudaError> {
        let mut graph: sys::CUgraph = std::ptr::null_mut();
        // SAFETY: an out-pointer living for the call.
        check("cuGraphCreate", unsafe {
            sys::cuGraphCreate(&mut graph, 0)
        })?;
        let mut g = CudaGraphExec {
            dev: self.inner.clone(),
            graph,
            exec: std::ptr::null_mut(),
            nodes: Vec::with_capacity(launches.len()),
            words: Vec::with_capacity(launches.len()),
        };
        let mut prev: Option<sys::CUgraphNode> = None;
        let mut ptrs = smallvec::SmallVec::new();
        for (b, words) in launches {
            g.words.push(words.to_vec());
            if b.n == 0 {
                g.nodes.push(None);
                continue;
            }
            let range = [0i64, b.n as i64];
            let p = node_params(b, words, &range, &mut ptrs);
            let mut node: sys::CUgraphNode = std::ptr::null_mut();
            let deps = prev.as_slice();
            // SAFETY: `graph` is live; `deps` are nodes of it; the parameters point at live
            // words, copied by the call.
            check("cuGraphAddKernelNode", unsafe {
                sys::cuGraphAddKernelNode_v2(&mut node, graph, deps.as_ptr(), deps.len(), &p)
            })?;
            g.nodes.push(Some(node));
            prev = Some(node);
        }
        // SAFETY: `graph` is complete; the executable is destroyed with `g`.
        check("cuGraphInstantiateWithFlags", unsafe {
            sys::cuGraphInstantiateWithFlags(&mut g.exec, graph, 0)
        })?;
        Ok(g)
    }
}
