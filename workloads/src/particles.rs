//! The RapidMind particle system (the paper's `evolve` program with `IF`): each step moves
//! every particle under gravity and bounces it off the floor `y = 0`, with the time step a
//! host `Uniform` read at each apply (loose binding). Positions and velocities are both input
//! and output of the step: the apply reads their old contents (double buffering).
//!
//! `cargo run --release -p weft-workloads --example particles [DEVICE] [N] [STEPS]`

use weft::dsl::{if_, In, Out, Program, Uniform, Value3f};
use weft::{Array, Device, Result};

/// Positions or velocities of every particle.
pub type State = Vec<[f32; 3]>;

/// Final positions and velocities of `n` particles after `steps` steps on `dev`.
pub fn particles(dev: &Device, n: usize, steps: usize) -> Result<(State, State)> {
    let dt = Uniform::named("dt", 0.01f32);
    let evolve = Program::record(|| {
        let pos = In::<Value3f>::named("pos");
        let vel = In::<Value3f>::named("vel");
        let gravity = Value3f::from_array([0.0, -9.8, 0.0]);
        let v = vel + gravity * &dt;
        let p = pos + &v * &dt;
        if_(p.y().lt(0.0f32), || {
            // Bounce: mirror the position and reverse the vertical speed, losing 20%.
            p.set_lanes([1], -p.y());
            v.set_lanes([1], v.y() * -0.8f32);
        });
        Out::named("pos", p);
        Out::named("vel", v);
    })?;
    let mut pos = Array::from_fn([n], |i| {
        [(i % 100) as f32, 1.0 + (i % 17) as f32 * 0.25, 0.0]
    })?;
    let mut vel = Array::from_fn([n], |i| [0.5, (i % 13) as f32 - 6.0, 0.1])?;
    for s in 0..steps {
        dt.set(if s % 2 == 0 { 0.01 } else { 0.02 });
        (pos, vel) = evolve.apply_on(dev, (&pos, &vel))?;
    }
    Ok((pos.to_vec()?, vel.to_vec()?))
}

/// The example's command line (see the module docs).
pub fn main() {
    let name = crate::device_arg();
    let n = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let steps = std::env::args()
        .nth(3)
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let run = || -> Result<()> {
        let dev = Device::by_name(&name)?;
        let t = std::time::Instant::now();
        let (p, v) = particles(&dev, n, steps)?;
        let below = p.iter().filter(|q| q[1] < 0.0).count();
        println!(
            "particles on {dev}: {n} particles, {steps} steps in {:.1} ms; p[0] = {:?}, v[0] = {:?}, below the floor: {below}",
            t.elapsed().as_secs_f64() * 1e3, p[0], v[0]
        );
        Ok(())
    };
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
