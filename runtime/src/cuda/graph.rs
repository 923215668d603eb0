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
        g.words
            .extend(launches.iter().map(|(_, words)| words.to_vec()));
        g.nodes = add_chain(graph, None, launches)?;
        // SAFETY: `graph` is complete; the executable is destroyed with `g`.
        check("cuGraphInstantiateWithFlags", unsafe {
            sys::cuGraphInstantiateWithFlags(&mut g.exec, graph, 0)
        })?;
        Ok(g)
    }
}

/// The condition kernel of a device loop ([`CudaDevice::run_loop_graph`]), PTX with the
/// target filled in: one thread adds one to the replay counter at `counter`, and sets the
/// loop's conditional handle `hw` (and, when not 0, `hi`, the second half's) to 1 while the
/// stop flag at `flag` (a `bool` launch output, 4 bytes) is 0 and the counter is below
/// `max`, else 0. `cudaGraphSetConditional` comes from the CUDA device runtime library.
const LOOP_COND_PTX: &str = r#".version {VERSION}
.target sm_{SM}
.address_size 64

.extern .func cudaGraphSetConditional
(
	.param .b64 h,
	.param .b32 v
)
;

.visible .entry weft_loop_cond(
	.param .u64 hw,
	.param .u64 hi,
	.param .u64 flag,
	.param .u64 counter,
	.param .u32 max
)
{
	.reg .pred 	%p<4>;
	.reg .b32 	%r<8>;
	.reg .b64 	%rd<8>;

	ld.param.u64 	%rd1, [hw];
	ld.param.u64 	%rd2, [hi];
	ld.param.u64 	%rd3, [flag];
	ld.param.u64 	%rd4, [counter];
	ld.param.u32 	%r1, [max];
	cvta.to.global.u64 	%rd5, %rd3;
	cvta.to.global.u64 	%rd6, %rd4;
	ld.global.u32 	%r2, [%rd6];
	add.s32 	%r3, %r2, 1;
	st.global.u32 	[%rd6], %r3;
	ld.global.u32 	%r4, [%rd5];
	setp.eq.s32 	%p1, %r4, 0;
	setp.lt.u32 	%p2, %r3, %r1;
	and.pred 	%p3, %p1, %p2;
	selp.u32 	%r5, 1, 0, %p3;
	{
	.param .b64 param0;
	st.param.b64 	[param0+0], %rd1;
	.param .b32 param1;
	st.param.b32 	[param1+0], %r5;
	call.uni 
	cudaGraphSetConditional, 
	(
	param0, 
	param1
	);
	}
	setp.eq.s64 	%p1, %rd2, 0;
	@%p1 bra 	$L_done;
	{
	.param .b64 param0;
	st.param.b64 	[param0+0], %rd2;
	.param .b32 param1;
	st.param.b32 	[param1+0], %r5;
	call.uni 
	cudaGraphSetConditional, 
	(
	param0, 
	param1
	);
	}
$L_done:
	ret;
}
"#;

/// The CUDA device runtime library (`libcudadevrt.a`) to link device loops' condition
/// kernels with: `WEFT_CUDADEVRT`, else the toolkit's under `CUDA_HOME`, `CUDA_PATH` or
/// `/usr/local/cuda`. `None` when there is none (device loops then run on the host).
fn devrt_path() -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os("WEFT_CUDADEVRT") {
        let p = std::path::PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    let roots = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .map(std::path::PathBuf::from)
        .chain([std::path::PathBuf::from("/usr/local/cuda")]);
    for root in roots {
        for sub in ["lib64", "targets/x86_64-linux/lib", "lib"] {
            let p = root.join(sub).join("libcudadevrt.a");
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// A graph made for one device loop and its executable; both destroyed when dropped.
struct LoopGraph {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
}

impl Drop for LoopGraph {
    fn drop(&mut self) {
        // SAFETY: made by `run_loop_graph`, destroyed once, here (the caller has waited for
        // the launch); a null executable was never instantiated.
        unsafe {
            if !self.exec.is_null() {
                let _ = result::graph::exec_destroy(self.exec);
            }
            let _ = result::graph::destroy(self.graph);
        }
    }
}

/// Adds `launches` to `graph` as a chain of kernel nodes after `prev`, and returns each
/// launch's node (`None` for a launch of no elements, which adds none).
fn add_chain(
    graph: sys::CUgraph,
    mut prev: Option<sys::CUgraphNode>,
    launches: &[(&CudaBoundLaunch, &[u64])],
) -> Result<Vec<Option<sys::CUgraphNode>>, CudaError> {
    let mut ptrs = smallvec::SmallVec::new();
    let mut nodes = Vec::with_capacity(launches.len());
    for (b, words) in launches {
        if b.n == 0 {
            nodes.push(None);
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
        nodes.push(Some(node));
        prev = Some(node);
    }
    Ok(nodes)
}

/// The last node of a chain [`add_chain`] made (`None`: no launch ran).
fn last_node(nodes: &[Option<sys::CUgraphNode>]) -> Option<sys::CUgraphNode> {
    nodes.iter().rev().find_map(|n| *n)
}

/// Adds a conditional node of `kind` on `handle` after `prev` to `graph` and returns its
/// body graph (owned by the node).
fn add_conditional(
    graph: sys::CUgraph,
    prev: Option<sys::CUgraphNode>,
    ctx: sys::CUcontext,
    handle: sys::CUgraphConditionalHandle,
    kind: sys::CUgraphConditionalNodeType,
) -> Result<sys::CUgraph, CudaError> {
    // SAFETY: a plain C struct, zero for every field not set.
    let mut p: sys::CUgraphNodeParams = unsafe { std::mem::zeroed() };
    p.type_ = sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_CONDITIONAL;
    p.__bindgen_anon_1.conditional = sys::CUDA_CONDITIONAL_NODE_PARAMS {
        handle,
        type_: kind,
        size: 1,
        phGraph_out: std::ptr::null_mut(),
        ctx,
    };
    let mut node: sys::CUgraphNode = std::ptr::null_mut();
    let deps = prev.as_slice();
    // SAFETY: `graph` is live, `deps` are nodes of it; the driver fills `phGraph_out`
    // with an array of one body graph owned by the node.
    check("cuGraphAddNode", unsafe {
        sys::cuGraphAddNode_v2(
            &mut node,
            graph,
            deps.as_ptr(),
            std::ptr::null(),
            deps.len(),
            &mut p,
        )
    })?;
    // SAFETY: written by the call above (a conditional node with `size` 1).
    let body = unsafe { *p.__bindgen_anon_1.conditional.phGraph_out };
    Ok(body)
}

/// A conditional handle of `graph` with default value `default`, reset to it at every
/// launch of the graph.
fn conditional_handle(
    graph: sys::CUgraph,
    ctx: sys::CUcontext,
    default: u32,
) -> Result<sys::CUgraphConditionalHandle, CudaError> {
    let mut h: sys::CUgraphConditionalHandle = 0;
    // SAFETY: `graph` and `ctx` are live; writes one handle.
    check("cuGraphConditionalHandleCreate", unsafe {
        sys::cuGraphConditionalHandleCreate(
            &mut h,
            graph,
            ctx,
            default,
            sys::CU_GRAPH_COND_ASSIGN_DEFAULT,
        )
    })?;
    Ok(h)
}

impl CudaDevice {
    /// Points output `k` of bound launch `b` in its words `words` (from
    /// [`CudaDevice::bound_words`]) at `buf` instead of the buffer allocated there: a device
    /// loop's launches write the loop's state in place ([`CudaDevice::run_loop_graph`]).
    ///
    /// # Errors
    /// No output `k`; `buf` of another device, element type or length.
    pub fn redirect_output(
        &self,
        b: &CudaBoundLaunch,
        words: &mut [u64],
        k: usize,
        buf: &CudaBuffer,
    ) -> Result<(), RuntimeError> {
        let bad = |m: &str| -> RuntimeError {
            RunError::Launch {
                program: b.name.clone(),
                message: format!("redirect_output: {m}"),
            }
            .into()
        };
        let &(ty, w) = b.outs.get(k).ok_or_else(|| bad("no such output"))?;
        if !buf.dev.same_gpu(&self.inner) || buf.elem != ty || buf.len != b.n {
            return Err(bad("a buffer of another device, type or length"));
        }
        for l in 0..buf.lanes() {
            words[w + l] = buf.buf.ptr + (l * buf.stride * buf.lane_bytes()) as u64;
        }
        Ok(())
    }

    /// The condition kernel of device loops on this device, linked with the CUDA device
    /// runtime once (`None`: the driver is older than 12.4, which has no conditional graph
    /// nodes, or no `libcudadevrt.a` was found, or linking failed).
    fn loop_cond(&self) -> Option<&LoadedModule> {
        let i = &self.inner;
        i.loop_cond
            .get_or_init(|| {
                let (major, minor) = cuda_driver_version().ok()?;
                if (major, minor) < (12, 4) {
                    return None;
                }
                let devrt = devrt_path()?;
                // The newest PTX ISA the driver reads (any target it runs needs no newer).
                let version = match (major, minor) {
                    (12, 4) => "8.4",
                    (12, 5 | 6) => "8.5",
                    (12, 7 | 8) => "8.7",
                    (12, _) => "8.8",
                    _ => "9.0",
                };
                let ptx = LOOP_COND_PTX
                    .replace("{VERSION}", version)
                    .replace("{SM}", &i.sm.to_string());
                guard("cuLinkComplete", || {
                    i.load_linked(&ptx, &devrt, "weft_loop_cond")
                })
                .ok()
            })
            .as_ref()
    }

    /// Whether this device runs device loops as graphs with conditional nodes
    /// ([`CudaDevice::run_loop_graph`]): driver 12.4 or later and a CUDA device runtime
    /// library to link their condition kernel with.
    pub fn supports_device_loops(&self) -> bool {
        self.loop_cond().is_some()
    }

    /// Runs a loop on the device as one CUDA graph (issue 23, CUDA 12.4's conditional
    /// nodes): a while node whose body runs `a` (a replay's launches, then a launch writing
    /// the stop flag `flags[0]`), the condition kernel, then an if node running `b` (the
    /// next replay's, flag `flags[1]`) and the condition kernel again — two replays per
    /// trip, so that each half reads the buffers the other wrote. The loop ends when a
    /// flag holds a nonzero value after its half, or after `max` halves. Waits for the
    /// graph and returns the number of halves run (at least 1): with `a` first, an odd
    /// count ends after an `a`. `Ok(None)` when the device does not run device loops
    /// ([`CudaDevice::supports_device_loops`]) or the driver refuses the graph; nothing ran
    /// then.
    ///
    /// # Errors
    /// A driver call failing (named); `max` of 0.
    pub fn run_loop_graph(
        &self,
        a: &[(&CudaBoundLaunch, &[u64])],
        b: &[(&CudaBoundLaunch, &[u64])],
        flags: [&CudaBuffer; 2],
        max: u32,
    ) -> Result<Option<u32>, RuntimeError> {
        if max == 0 {
            return Err(RunError::Launch {
                program: "device loop".into(),
                message: "at most 0 replays".into(),
            }
            .into());
        }
        let Some(cond) = self.loop_cond() else {
            return Ok(None);
        };
        let i = &self.inner;
        let count = guard("cuGraphLaunch", || {
            i.bind()?;
            let ctx = i.ctx.cu_ctx();
            let counter = i.alloc(4)?;
            // Built and instantiated first: a driver that refuses (a conditional node it
            // does not take, say) leaves nothing queued, and the loop runs on the host.
            let build = || -> Result<LoopGraph, CudaError> {
                let mut graph: sys::CUgraph = std::ptr::null_mut();
                // SAFETY: an out-pointer living for the call.
                check("cuGraphCreate", unsafe {
                    sys::cuGraphCreate(&mut graph, 0)
                })?;
                let mut g = LoopGraph {
                    graph,
                    exec: std::ptr::null_mut(),
                };
                let hw = conditional_handle(graph, ctx, 1)?;
                let hi = conditional_handle(graph, ctx, 0)?;
                let wb = add_conditional(
                    graph,
                    None,
                    ctx,
                    hw,
                    sys::CUgraphConditionalNodeType::CU_GRAPH_COND_TYPE_WHILE,
                )?;
                let cond_node = |body: sys::CUgraph,
                                 prev: Option<sys::CUgraphNode>,
                                 second: u64,
                                 flag: &CudaBuffer|
                 -> Result<sys::CUgraphNode, CudaError> {
                    let (mut w, mut s, mut f, mut c, mut m) =
                        (hw, second, flag.buf.ptr, counter.ptr, max);
                    let mut params: [*mut c_void; 5] = [
                        (&mut w as *mut u64).cast(),
                        (&mut s as *mut u64).cast(),
                        (&mut f as *mut u64).cast(),
                        (&mut c as *mut u64).cast(),
                        (&mut m as *mut u32).cast(),
                    ];
                    // SAFETY: a plain C struct, zero for every field not set below.
                    let mut p: sys::CUDA_KERNEL_NODE_PARAMS = unsafe { std::mem::zeroed() };
                    p.func = cond.func;
                    (p.gridDimX, p.gridDimY, p.gridDimZ) = (1, 1, 1);
                    (p.blockDimX, p.blockDimY, p.blockDimZ) = (1, 1, 1);
                    p.kernelParams = params.as_mut_ptr();
                    let mut node: sys::CUgraphNode = std::ptr::null_mut();
                    let deps = prev.as_slice();
                    // SAFETY: `body` is live, `deps` are nodes of it; the parameters point at
                    // locals living for the call, which copies them.
                    check("cuGraphAddKernelNode", unsafe {
                        sys::cuGraphAddKernelNode_v2(&mut node, body, deps.as_ptr(), deps.len(), &p)
                    })?;
                    Ok(node)
                };
                let last = last_node(&add_chain(wb, None, a)?);
                let ca = cond_node(wb, last, hi, flags[0])?;
                let ib = add_conditional(
                    wb,
                    Some(ca),
                    ctx,
                    hi,
                    sys::CUgraphConditionalNodeType::CU_GRAPH_COND_TYPE_IF,
                )?;
                let last = last_node(&add_chain(ib, None, b)?);
                cond_node(ib, last, 0, flags[1])?;
                // SAFETY: `graph` is complete; the executable is destroyed with `g`.
                check("cuGraphInstantiateWithFlags", unsafe {
                    sys::cuGraphInstantiateWithFlags(&mut g.exec, graph, 0)
                })?;
                Ok(g)
            };
            let Ok(g) = build() else {
                return Ok(None);
            };
            let stream = i.stream.cu_stream();
            // SAFETY: `counter` holds 4 bytes on this context; queued on its stream.
            check("cuMemsetD32Async", unsafe {
                sys::cuMemsetD32Async(counter.ptr, 0, 1, stream)
            })?;
            // SAFETY: an executable made for this context, launched on its stream.
            check("cuGraphLaunch", unsafe {
                sys::cuGraphLaunch(g.exec, stream)
            })?;
            i.sync()?;
            let mut n: u32 = 0;
            // SAFETY: the stream is idle; copies 4 bytes into `n`.
            check("cuMemcpyDtoH", unsafe {
                sys::cuMemcpyDtoH_v2((&mut n as *mut u32).cast(), counter.ptr, 4)
            })?;
            drop(g);
            Ok(Some(n))
        })?;
        Ok(count)
    }
}
