//! Recurrent layers (`RNN`, `GRU`, `LSTM`) unrolled over time as IR ops: the input's part of
//! every gate for all steps in one product, then per step the hidden state's part, the gates'
//! activations and the state update. Every option of ONNX's operators that the IR's own
//! `LSTM` op lacks (no bias, initial states, the last states as outputs, peepholes,
//! `batch`-first layout, reverse direction, other activations, `clip`, `GRU`'s
//! `linear_before_reset`) is here; the gradients are the IR ops'.
//!
//! Refused (imported for planning only): activations with `activation_alpha` or
//! `activation_beta`, `LSTM`'s `input_forget`, and sequence lengths that differ within the
//! batch.

use ordo_ir::op::UnaryOp;
use ordo_ir::{DType, Op, OutletId, TensorFact};

use super::common::Outputs;
use super::parts::Parts;
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;
use crate::tensor::{ConstData, ConstTensor, code};

/// About the most IR nodes one step of one direction unrolls to (an LSTM with peepholes and
/// clipping).
const NODES_PER_STEP: usize = 40;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Cell {
    Rnn,
    Gru,
    Lstm,
}

impl Cell {
    /// Gates in the weights: RNN 1, GRU 3 (z, r, h), LSTM 4 (i, o, f, c).
    fn gates(self) -> usize {
        match self {
            Cell::Rnn => 1,
            Cell::Gru => 3,
            Cell::Lstm => 4,
        }
    }

    /// The activations per direction, by default.
    fn default_activations(self) -> &'static [UnaryOp] {
        match self {
            Cell::Rnn => &[UnaryOp::Tanh],
            Cell::Gru => &[UnaryOp::Sigmoid, UnaryOp::Tanh],
            Cell::Lstm => &[UnaryOp::Sigmoid, UnaryOp::Tanh, UnaryOp::Tanh],
        }
    }
}

/// What a direction's steps need, read once.
struct Direction {
    reverse: bool,
    /// f, g (and h) of the cell.
    activations: Vec<UnaryOp>,
    /// The hidden state's weights transposed, `[H, G * H]` (GRU without
    /// `linear_before_reset`: the z and r gates', `[H, 2H]`).
    recurrence: OutletId,
    /// The hidden state's bias, `[G * H]` (`[2H]` where `recurrence` is).
    recurrence_bias: Option<OutletId>,
    /// GRU without `linear_before_reset`: the h gate's weights `[H, H]` and bias `[H]`, which
    /// take the reset hidden state, not the hidden state (sliced once, not at every step).
    reset_gate: Option<(OutletId, Option<OutletId>)>,
    /// The input's part of every gate for every step, `[T, B, G * H]` (its bias added).
    inputs: OutletId,
    /// Peepholes `[i, o, f]`, each `[H]` (LSTM).
    peepholes: Option<[OutletId; 3]>,
}

/// The checked shapes and options of a recurrent node.
struct Layer {
    cell: Cell,
    /// `[T, B, I]` is layout 0, `[B, T, I]` layout 1 (and the outputs batch-first too).
    batch_first: bool,
    steps: usize,
    batch: usize,
    hidden: usize,
    reverse: Vec<bool>,
    activations: Vec<UnaryOp>,
    clip: Option<f64>,
    linear_before_reset: bool,
}

fn fact(ctx: &Ctx<'_>, node: &Node<'_>, i: usize) -> OnnxResult<Option<TensorFact>> {
    match node.input(i) {
        None => Ok(None),
        Some(_) => Ok(Some(ctx.fact_of(node, &ctx.input(node, i)?)?)),
    }
}

/// Reads and checks everything before anything is emitted (an unsupported option then falls
/// back to the plannable import).
fn layer(ctx: &Ctx<'_>, node: &Node<'_>) -> OnnxResult<Layer> {
    let cell = match node.op_type() {
        "RNN" => Cell::Rnn,
        "GRU" => Cell::Gru,
        _ => Cell::Lstm,
    };
    let x = fact(ctx, node, 0)?.ok_or_else(|| node.malformed("input 0 is missing"))?;
    if x.dtype != DType::F32 {
        return Err(node.unsupported(format!("input {x}: recurrent layers run on f32")));
    }
    let batch_first = match node.int("layout", 0)? {
        0 => false,
        1 => true,
        other => return Err(node.malformed(format!("layout {other}: expected 0 or 1"))),
    };
    let [a, b, _] = x.shape[..] else {
        return Err(node.shape_error(format!("input {x}: expected [T, B, I] (or [B, T, I])")));
    };
    let (steps, batch) = if batch_first { (b, a) } else { (a, b) };
    let reverse = match node.string("direction", "forward")?.as_str() {
        "forward" => vec![false],
        "reverse" => vec![true],
        "bidirectional" => vec![false, true],
        other => return Err(node.malformed(format!("direction `{other}`"))),
    };
    let dirs = reverse.len();
    if steps * dirs * NODES_PER_STEP > crate::control::MAX_ADDED_NODES {
        return Err(node.unsupported(format!(
            "{steps} steps in {dirs} direction(s) unroll to more than {} nodes, the most ordo \
             unrolls",
            crate::control::MAX_ADDED_NODES
        )));
    }
    let g = cell.gates();
    let w = fact(ctx, node, 1)?.ok_or_else(|| node.malformed("input 1 (W) is missing"))?;
    let r = fact(ctx, node, 2)?.ok_or_else(|| node.malformed("input 2 (R) is missing"))?;
    let hidden = match r.shape[..] {
        [_, _, h] => h,
        _ => return Err(node.shape_error(format!("R {r}: expected [directions, gates * H, H]"))),
    };
    if node.has_attr("hidden_size") && node.int("hidden_size", 0)? != hidden as i64 {
        return Err(
            node.shape_error(format!("hidden_size {} for R {r}", node.int("hidden_size", 0)?))
        );
    }
    let expect = |what: &str, f: &Option<TensorFact>, shape: Vec<usize>| match f {
        Some(f) if f.shape != shape => {
            Err(node.shape_error(format!("{what} {f}: expected {shape:?}")))
        }
        _ => Ok(()),
    };
    expect("W", &Some(w), vec![dirs, g * hidden, x.shape[2]])?;
    expect("R", &Some(r), vec![dirs, g * hidden, hidden])?;
    expect("B", &fact(ctx, node, 3)?, vec![dirs, 2 * g * hidden])?;
    let state = if batch_first { vec![batch, dirs, hidden] } else { vec![dirs, batch, hidden] };
    expect("initial_h", &fact(ctx, node, 5)?, state.clone())?;
    if cell == Cell::Lstm {
        expect("initial_c", &fact(ctx, node, 6)?, state)?;
        expect("P", &fact(ctx, node, 7)?, vec![dirs, 3 * hidden])?;
        if node.int("input_forget", 0)? != 0 {
            return Err(node.unsupported("input_forget (coupled input and forget gates)"));
        }
    }
    if node.input(4).is_some() {
        let lengths = ctx.const_ints(node, 4, "sequence_lens")?;
        if lengths.len() != batch || lengths.iter().any(|&l| l != steps as i64) {
            return Err(node.unsupported(format!(
                "sequence_lens {lengths:?}: sequences of other lengths than the input's {steps}"
            )));
        }
    }
    if node.has_attr("activation_alpha") || node.has_attr("activation_beta") {
        return Err(node.unsupported("activations with parameters (activation_alpha, _beta)"));
    }
    let per_direction = cell.default_activations().len();
    let activations = match node.strings("activations") {
        None => cell.default_activations().repeat(dirs),
        Some(names) if names.len() == per_direction * dirs => {
            names.iter().map(|n| activation(node, n)).collect::<OnnxResult<_>>()?
        }
        Some(names) => {
            return Err(node.malformed(format!(
                "activations {names:?}: expected {} ({per_direction} per direction)",
                per_direction * dirs
            )));
        }
    };
    let clip = match node.has_attr("clip") {
        true => match node.float("clip", 0.0)? {
            c if c > 0.0 => Some(c),
            c => return Err(node.malformed(format!("clip {c}: expected a positive threshold"))),
        },
        false => None,
    };
    let linear_before_reset = node.int("linear_before_reset", 0)? != 0;
    Ok(Layer {
        cell,
        batch_first,
        steps,
        batch,
        hidden,
        reverse,
        activations,
        clip,
        linear_before_reset,
    })
}

/// The IR function of an activation's name.
fn activation(node: &Node<'_>, name: &str) -> OnnxResult<UnaryOp> {
    Ok(match name.to_ascii_lowercase().as_str() {
        "sigmoid" => UnaryOp::Sigmoid,
        "tanh" => UnaryOp::Tanh,
        "relu" => UnaryOp::Relu,
        "softsign" => UnaryOp::Softsign,
        "softplus" => UnaryOp::Softplus,
        _ => return Err(node.unsupported(format!("activation `{name}`"))),
    })
}

/// `RNN`, `GRU` or `LSTM` unrolled: outputs `Y` (`[T, D, B, H]`, batch-first `[B, T, D, H]`),
/// `Y_h` (`[D, B, H]`, batch-first `[B, D, H]`) and for LSTM `Y_c`.
pub(crate) fn unrolled(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let l = layer(ctx, node)?;
    let mut p = Parts::of(node);
    let (t, b, h) = (l.steps, l.batch, l.hidden);
    let gh = l.cell.gates() * h;
    let mut x = ctx.wire(node, 0)?;
    if l.batch_first {
        x = p.transpose(ctx, x, &[1, 0, 2])?;
    }
    let input_size = ctx.graph.fact(x).expect("emitted").shape[2];
    let rows = p.reshape(ctx, x, &[t * b, input_size])?;
    let per_activation = l.cell.default_activations().len();
    let (mut ys, mut last_h, mut last_c) = (Vec::new(), Vec::new(), Vec::new());
    for (d, &reverse) in l.reverse.iter().enumerate() {
        let weight = |ctx: &mut Ctx<'_>, p: &mut Parts<'_, '_>, i: usize, cols: usize| {
            let w = ctx.wire(node, i)?;
            let w = p.slice(ctx, w, 0, d, d + 1)?;
            let w = p.reshape(ctx, w, &[gh, cols])?;
            p.transpose(ctx, w, &[1, 0])
        };
        let w = weight(ctx, &mut p, 1, input_size)?;
        let recurrence = weight(ctx, &mut p, 2, h)?;
        let (mut input_bias, mut recurrence_bias) = (None, None);
        if node.input(3).is_some() {
            let bias = ctx.wire(node, 3)?;
            let bias = p.slice(ctx, bias, 0, d, d + 1)?;
            let bias = p.reshape(ctx, bias, &[2 * gh])?;
            input_bias = Some(p.slice(ctx, bias, 0, 0, gh)?);
            recurrence_bias = Some(p.slice(ctx, bias, 0, gh, 2 * gh)?);
        }
        let mut inputs = p.op(ctx, "input_gates", Op::MatMul, &[rows, w])?;
        if let Some(bias) = input_bias {
            inputs = p.add(ctx, inputs, bias)?;
        }
        let inputs = p.reshape(ctx, inputs, &[t, b, gh])?;
        let peepholes = match (l.cell, node.input(7)) {
            (Cell::Lstm, Some(_)) => {
                let all = ctx.wire(node, 7)?;
                let all = p.slice(ctx, all, 0, d, d + 1)?;
                let all = p.reshape(ctx, all, &[3 * h])?;
                let mut each = [all; 3];
                for (k, e) in each.iter_mut().enumerate() {
                    *e = p.slice(ctx, all, 0, k * h, (k + 1) * h)?;
                }
                Some(each)
            }
            _ => None,
        };
        let activations = l.activations[d * per_activation..(d + 1) * per_activation].to_vec();
        let (recurrence, recurrence_bias, reset_gate) =
            if l.cell == Cell::Gru && !l.linear_before_reset {
                let zr = p.slice(ctx, recurrence, 1, 0, 2 * h)?;
                let weights = p.slice(ctx, recurrence, 1, 2 * h, 3 * h)?;
                let (zr_bias, h_bias) = match recurrence_bias {
                    Some(bias) => (
                        Some(p.slice(ctx, bias, 0, 0, 2 * h)?),
                        Some(p.slice(ctx, bias, 0, 2 * h, 3 * h)?),
                    ),
                    None => (None, None),
                };
                (zr, zr_bias, Some((weights, h_bias)))
            } else {
                (recurrence, recurrence_bias, None)
            };
        let dir = Direction {
            reverse,
            activations,
            recurrence,
            recurrence_bias,
            reset_gate,
            inputs,
            peepholes,
        };
        let mut state_h = initial_state(ctx, &mut p, node, 5, d, &l)?;
        let mut state_c = match l.cell {
            Cell::Lstm => Some(initial_state(ctx, &mut p, node, 6, d, &l)?),
            _ => None,
        };
        let mut outputs = vec![state_h; t];
        let order: Vec<usize> = if dir.reverse { (0..t).rev().collect() } else { (0..t).collect() };
        for step in order {
            let (next_h, next_c) = cell_step(ctx, &mut p, &l, &dir, step, state_h, state_c)?;
            state_h = next_h;
            state_c = next_c;
            outputs[step] = state_h;
        }
        ys.push(outputs);
        last_h.push(state_h);
        last_c.extend(state_c);
    }
    let mut values = Vec::new();
    // Y: [T, D, B, H] from every step of every direction.
    if super::common::output_read(ctx, node, 0) {
        let mut per_direction = Vec::with_capacity(ys.len());
        for outputs in &ys {
            let mut each = Vec::with_capacity(t);
            for &y in outputs {
                each.push(p.reshape(ctx, y, &[1, 1, b, h])?);
            }
            per_direction.push(concat(ctx, &mut p, each, 0)?);
        }
        let mut y = concat(ctx, &mut p, per_direction, 1)?;
        if l.batch_first {
            y = p.transpose(ctx, y, &[2, 0, 1, 3])?;
        }
        values.push(Some(ctx.wire_value(y)));
    } else {
        values.push(None);
    }
    for (k, states) in [(1, last_h), (2, last_c)] {
        if !super::common::output_read(ctx, node, k) || states.is_empty() {
            values.push(None);
            continue;
        }
        let mut each = Vec::with_capacity(states.len());
        for s in states {
            each.push(p.reshape(ctx, s, &[1, b, h])?);
        }
        let mut s = concat(ctx, &mut p, each, 0)?;
        if l.batch_first {
            s = p.transpose(ctx, s, &[1, 0, 2])?;
        }
        values.push(Some(ctx.wire_value(s)));
    }
    values.resize(node.num_outputs().max(1), None);
    values.truncate(node.num_outputs().max(1));
    Ok(values)
}

/// Tensors joined along `axis` (one tensor stays itself).
fn concat(
    ctx: &mut Ctx<'_>,
    p: &mut Parts<'_, '_>,
    parts: Vec<OutletId>,
    axis: i64,
) -> OnnxResult<OutletId> {
    match parts[..] {
        [one] => Ok(one),
        _ => p.op(ctx, "concat", Op::Concat { axis }, &parts),
    }
}

/// Direction `d`'s initial state from input `i` (`[B, H]`), zeros where it is not given.
fn initial_state(
    ctx: &mut Ctx<'_>,
    p: &mut Parts<'_, '_>,
    node: &Node<'_>,
    i: usize,
    d: usize,
    l: &Layer,
) -> OnnxResult<OutletId> {
    let (b, h) = (l.batch, l.hidden);
    if node.input(i).is_none() {
        let zeros =
            ConstTensor { elem: code::FLOAT, shape: vec![b, h], data: ConstData::Splat(0.0) };
        return ctx.buffer(node, &format!("{}.zero_state{i}", node.name), &zeros);
    }
    let s = ctx.wire(node, i)?;
    let s = p.slice(ctx, s, usize::from(l.batch_first), d, d + 1)?;
    p.reshape(ctx, s, &[b, h])
}

/// One step: the new hidden state (and LSTM's cell state) from the previous ones.
fn cell_step(
    ctx: &mut Ctx<'_>,
    p: &mut Parts<'_, '_>,
    l: &Layer,
    dir: &Direction,
    step: usize,
    state_h: OutletId,
    state_c: Option<OutletId>,
) -> OnnxResult<(OutletId, Option<OutletId>)> {
    let (b, h) = (l.batch, l.hidden);
    let gh = l.cell.gates() * h;
    let x = p.slice(ctx, dir.inputs, 0, step, step + 1)?;
    let x = p.reshape(ctx, x, &[b, gh])?;
    // Gate k's input part and the recurrence's part (which GRU's h gate takes apart).
    let gate = |ctx: &mut Ctx<'_>, p: &mut Parts<'_, '_>, all: OutletId, k: usize| {
        p.slice(ctx, all, 1, k * h, (k + 1) * h)
    };
    let recurrence =
        |ctx: &mut Ctx<'_>, p: &mut Parts<'_, '_>, hidden: OutletId| -> OnnxResult<OutletId> {
            let mut r = p.op(ctx, "recurrence", Op::MatMul, &[hidden, dir.recurrence])?;
            if let Some(bias) = dir.recurrence_bias {
                r = p.add(ctx, r, bias)?;
            }
            Ok(r)
        };
    let act =
        |ctx: &mut Ctx<'_>, p: &mut Parts<'_, '_>, x: OutletId, k: usize| -> OnnxResult<OutletId> {
            let x = match l.clip {
                Some(c) => p.op(ctx, "clipped", Op::Clip { min: -c, max: c }, &[x])?,
                None => x,
            };
            p.unary(ctx, x, dir.activations[k])
        };
    let hr = recurrence(ctx, p, state_h)?;
    match l.cell {
        Cell::Rnn => {
            let pre = p.add(ctx, x, hr)?;
            Ok((act(ctx, p, pre, 0)?, None))
        }
        Cell::Gru => {
            let (xz, xr, xh) = (gate(ctx, p, x, 0)?, gate(ctx, p, x, 1)?, gate(ctx, p, x, 2)?);
            let (rz, rr) = (gate(ctx, p, hr, 0)?, gate(ctx, p, hr, 1)?);
            let z = p.add(ctx, xz, rz)?;
            let z = act(ctx, p, z, 0)?;
            let r = p.add(ctx, xr, rr)?;
            let r = act(ctx, p, r, 0)?;
            let candidate = match dir.reset_gate {
                None => {
                    let rh = gate(ctx, p, hr, 2)?;
                    p.mul(ctx, r, rh)?
                }
                Some((weights, bias)) => {
                    // (r * h_prev) R_h^T + Rb_h: the reset state through the h gate's weights.
                    let reset = p.mul(ctx, r, state_h)?;
                    let mut part = p.op(ctx, "reset_recurrence", Op::MatMul, &[reset, weights])?;
                    if let Some(bias) = bias {
                        part = p.add(ctx, part, bias)?;
                    }
                    part
                }
            };
            let candidate = p.add(ctx, xh, candidate)?;
            let candidate = act(ctx, p, candidate, 1)?;
            // (1 - z) * candidate + z * h_prev = candidate + z * (h_prev - candidate).
            let kept = p.sub(ctx, state_h, candidate)?;
            let kept = p.mul(ctx, z, kept)?;
            Ok((p.add(ctx, candidate, kept)?, None))
        }
        Cell::Lstm => {
            let c_prev = state_c.expect("LSTM");
            let pre = p.add(ctx, x, hr)?;
            let [pi, po, pf] = match dir.peepholes {
                Some(peep) => peep.map(Some),
                None => [None; 3],
            };
            let gate_with = |ctx: &mut Ctx<'_>,
                             p: &mut Parts<'_, '_>,
                             k: usize,
                             peep: Option<OutletId>,
                             c: OutletId|
             -> OnnxResult<OutletId> {
                let mut g = gate(ctx, p, pre, k)?;
                if let Some(peep) = peep {
                    let through = p.mul(ctx, peep, c)?;
                    g = p.add(ctx, g, through)?;
                }
                act(ctx, p, g, 0)
            };
            let i = gate_with(ctx, p, 0, pi, c_prev)?;
            let f = gate_with(ctx, p, 2, pf, c_prev)?;
            let candidate = gate(ctx, p, pre, 3)?;
            let candidate = act(ctx, p, candidate, 1)?;
            let kept = p.mul(ctx, f, c_prev)?;
            let added = p.mul(ctx, i, candidate)?;
            let c = p.add(ctx, kept, added)?;
            let o = gate_with(ctx, p, 1, po, c)?;
            let shown = p.unary(ctx, c, dir.activations[2])?;
            Ok((p.mul(ctx, o, shown)?, Some(c)))
        }
    }
}
