//! The one launch-preparation path of the compiled devices (CPU and CUDA): a program is
//! looked up, split into prologue and kernel by uniform lifting (DESIGN §4), and lowered
//! (math expanded, calls inlined) once into a [`Prepared`]; each launch then only checks its
//! arguments against it — and not even that when they have the signature and uniform values
//! of a recent launch, whose plan is kept.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use weft_ir::launch::{plan_program_launch_desc, ArgDesc};
use weft_ir::passes::lift::{split_launch, LaunchSplit};
use weft_ir::{Const, Module, RunError, Type};

/// A program prepared for launching (built by [`Prepared::new`], kept by the devices next
/// to its compiled code).
pub struct Prepared {
    name: Arc<str>,
    /// The module as given: arguments are checked against its program, so errors name the
    /// user's parameters.
    source: Module,
    /// The module the kernel compiles from when it differs from `source`: lifted, math
    /// expanded, calls inlined ([`weft_ir::passes::for_lowering`]).
    kernel: Option<Module>,
    /// The uniform-lifting split: its prologue runs at each new plan (its kernel module has
    /// moved to `kernel`).
    split: Option<LaunchSplit>,
    /// The plans of the latest launches (at most [`PLANS_KEPT`], most recent last), reused
    /// for arguments of the same signature: a reduction alternates between a few.
    last: Mutex<Vec<(Signature, Arc<Plan>)>>,
}

/// Plans a [`Prepared`] keeps for reuse.
const PLANS_KEPT: usize = 8;

/// What a launch needs beyond its buffers, from [`Prepared::plan`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The launch shape, outermost axis first.
    pub shape: Vec<usize>,
    /// Its element count.
    pub n: usize,
    /// The prologue's results, appended to the kernel's arguments as uniforms (empty when
    /// nothing was lifted).
    pub extra: Vec<Const>,
}

/// A launch's arguments without their data: array element types and shapes, uniform values
/// (the prologue's results depend on them), and the explicit launch shape.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Signature {
    args: Vec<ArgKey>,
    shape: Option<Vec<usize>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum ArgKey {
    Array(Type, Vec<usize>),
    Uniform(Const),
}

impl Signature {
    /// Whether a launch with `descs` and `shape` has this signature; uniform values count
    /// only when `values` (a plan depends on them only through a lifted prologue).
    fn matches(&self, descs: &[ArgDesc], shape: Option<&[usize]>, values: bool) -> bool {
        self.shape.as_deref() == shape
            && self.args.len() == descs.len()
            && self.args.iter().zip(descs).all(|(k, d)| match (k, d) {
                (ArgKey::Array(t, s), ArgDesc::Array { elem, shape }) => t == elem && s == shape,
                (ArgKey::Uniform(a), ArgDesc::Uniform(b)) => {
                    if values {
                        a == b
                    } else {
                        a.ty == b.ty
                    }
                }
                _ => false,
            })
    }

    fn of(descs: &[ArgDesc], shape: Option<&[usize]>) -> Signature {
        Signature {
            args: descs
                .iter()
                .map(|d| match d {
                    ArgDesc::Array { elem, shape } => ArgKey::Array(*elem, shape.to_vec()),
                    ArgDesc::Uniform(c) => ArgKey::Uniform(*c),
                })
                .collect(),
            shape: shape.map(<[usize]>::to_vec),
        }
    }
}

impl Prepared {
    /// Prepares program `name` of `m` (which must verify): lifts its uniform work into a
    /// prologue and lowers the kernel's module once.
    ///
    /// # Errors
    /// [`RunError::UnknownProgram`] when `m` has no program `name`.
    pub fn new(m: &Module, name: &str) -> Result<Prepared, RunError> {
        if m.get(name).is_none() {
            return Err(RunError::UnknownProgram(name.to_string()));
        }
        let mut split = split_launch(m, name);
        let kernel = match &mut split {
            // The split's kernel module moves here; the split keeps only its prologue.
            Some(s) => {
                let k = std::mem::replace(&mut s.kernel, Module::new());
                Some(match weft_ir::passes::for_lowering(&k, name) {
                    Cow::Borrowed(_) => k,
                    Cow::Owned(lowered) => lowered,
                })
            }
            None => match weft_ir::passes::for_lowering(m, name) {
                Cow::Borrowed(_) => None,
                Cow::Owned(m) => Some(m),
            },
        };
        Ok(Prepared {
            name: name.into(),
            source: m.clone(),
            kernel,
            split,
            last: Mutex::new(Vec::new()),
        })
    }

    /// The program's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The program's name, shared (for errors of launches, without copying it per launch).
    pub fn name_shared(&self) -> &Arc<str> {
        &self.name
    }

    /// The module the kernel compiles from (lifted, math expanded, calls inlined); its
    /// program [`Prepared::name`] takes the user's arguments and then one uniform per
    /// [`Plan::extra`] value.
    pub fn kernel_module(&self) -> &Module {
        self.kernel.as_ref().unwrap_or(&self.source)
    }

    /// The program as given (what arguments are checked against).
    pub fn program(&self) -> &weft_ir::Program {
        self.source
            .get(&self.name)
            .expect("checked in Prepared::new")
    }

    /// Checks a launch's arguments (`descs`, one per parameter) and optional launch shape
    /// against the program and plans it: launch shape, element count, and the prologue's
    /// results for these uniform values. A launch with the signature (and, when a prologue
    /// was lifted, the uniform values) of one of the latest few reuses its plan.
    ///
    /// # Errors
    /// The interpreter's messages for wrong arguments or launch shape, naming the
    /// parameter; a failing prologue.
    pub fn plan(&self, descs: &[ArgDesc], shape: Option<&[usize]>) -> Result<Arc<Plan>, RunError> {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        // Without a prologue the plan (shape, count, no extra uniforms) does not depend on
        // the uniform values: a loop passing a new step size each launch keeps its plan.
        let values = self.split.is_some();
        if let Some(k) = last
            .iter()
            .rposition(|(sig, _)| sig.matches(descs, shape, values))
        {
            let hit = last.remove(k);
            let plan = hit.1.clone();
            last.push(hit);
            return Ok(plan);
        }
        let (p, launch, n) = plan_program_launch_desc(&self.source, &self.name, descs, shape)?;
        let extra = match &self.split {
            Some(s) => {
                let uniforms: Vec<Option<Const>> = descs
                    .iter()
                    .map(|d| match d {
                        ArgDesc::Uniform(c) => Some(*c),
                        ArgDesc::Array { .. } => None,
                    })
                    .collect();
                s.run_prologue(p, &uniforms)?
            }
            None => Vec::new(),
        };
        let plan = Arc::new(Plan {
            shape: launch,
            n,
            extra,
        });
        if last.len() == PLANS_KEPT {
            last.remove(0);
        }
        last.push((Signature::of(descs, shape), plan.clone()));
        Ok(plan)
    }
}

/// Prepared programs by module identity, for callers that keep a module unchanged behind an
/// `Arc` (the `weft` library's programs): found by the `Arc`'s address and the program's
/// position in it, with no hashing of the IR. Each entry holds its `Arc`, so while it lives the address
/// cannot be reused by another module; evicted entries are simply prepared again.
pub(crate) struct ByIdentity<V> {
    map: Mutex<IdentityMap<V>>,
}

/// (module address, program position in the module) → (the module, the value).
type IdentityMap<V> = crate::cache::Lru<(usize, usize), (Arc<Module>, V)>;

impl<V> Default for ByIdentity<V> {
    fn default() -> Self {
        ByIdentity {
            map: Mutex::default(),
        }
    }
}

impl<V: Clone> ByIdentity<V> {
    fn lock(&self) -> std::sync::MutexGuard<'_, IdentityMap<V>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The entry of (`m`, `name`), or `make()`'s value inserted.
    pub(crate) fn get_or<E>(
        &self,
        m: &Arc<Module>,
        name: &str,
        make: impl FnOnce() -> Result<V, E>,
    ) -> Result<V, E> {
        // A program the module lacks is never stored: `make` reports it.
        let key = (
            Arc::as_ptr(m) as usize,
            m.position(name).unwrap_or(usize::MAX),
        );
        if let Some((_, v)) = self.lock().get(&key) {
            return Ok(v);
        }
        let v = make()?;
        Ok(self.lock().get_or_insert(key, (m.clone(), v)).1)
    }

    /// Whether program `name` of `m` has an entry (not marking it used).
    pub(crate) fn contains(&self, m: &Arc<Module>, name: &str) -> bool {
        let key = (
            Arc::as_ptr(m) as usize,
            m.position(name).unwrap_or(usize::MAX),
        );
        self.lock().contains(&key)
    }

    /// Forgets every entry.
    pub(crate) fn clear(&self) {
        self.lock().clear();
    }

    /// Sets the capacity (see [`crate::cache::Lru`]).
    pub(crate) fn set_capacity(&self, n: usize) {
        self.lock().set_capacity(n);
    }
}
