//! Dense CPU tensors: a shape and contiguous row-major storage.

use ordo_ir::{DType, TensorFact};

use super::error::{KernelError, KernelResult};

/// The storage of a [`Tensor`]: `f32` for floating-point tensors, `i64` for integer tensors
/// (token ids, class labels), `bool` for masks and comparisons. Other element types are held
/// in one of these ([`super::held_as`]: an f16 in `f32`, an i32 or u8 in `i64`).
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    /// Floating-point values.
    F32(Vec<f32>),
    /// Integer values.
    I64(Vec<i64>),
    /// Truth values.
    Bool(Vec<bool>),
}

/// A dense tensor: plain data, a shape (outermost dimension first) and its elements in
/// row-major order. The number of elements always equals the product of the shape.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    shape: Vec<usize>,
    data: Data,
}

fn numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
}

/// `n` copies of `value` for a tensor of `shape`, or an error when the memory cannot be had:
/// more than the machine has (checked before asking), or refused by the allocator. Sizes
/// come from files and options; an impossible one must be an error, not an abort.
fn filled<T: Clone>(shape: &[usize], value: T) -> KernelResult<Vec<T>> {
    let n = numel(shape).ok_or_else(|| length_error(shape, usize::MAX))?;
    let bytes = (n as u64).saturating_mul(std::mem::size_of::<T>() as u64);
    let too_big = |why: String| KernelError::Value {
        op: "Tensor".into(),
        message: format!("a tensor of shape {shape:?} needs {bytes} bytes, {why}"),
    };
    if let Some(total) = host_memory_bytes()
        && bytes > total
    {
        return Err(too_big(format!("more than this machine's {total}")));
    }
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| too_big("which the system refused".into()))?;
    v.resize(n, value);
    Ok(v)
}

/// The machine's memory in bytes (`MemTotal` of `/proc/meminfo`), read once; `None` where
/// it cannot be read.
fn host_memory_bytes() -> Option<u64> {
    static TOTAL: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *TOTAL.get_or_init(|| {
        let text = std::fs::read_to_string("/proc/meminfo").ok()?;
        let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        kib.checked_mul(1024)
    })
}

fn length_error(shape: &[usize], len: usize) -> KernelError {
    KernelError::Value {
        op: "Tensor".into(),
        message: format!("{len} elements do not fill shape {shape:?}"),
    }
}

impl Tensor {
    /// A tensor of `fact`'s shape filled with zeros, in the storage of its element type.
    ///
    /// # Errors
    /// [`KernelError::Value`]
    /// when the element count overflows or the memory cannot be had.
    pub fn zeros(fact: &TensorFact) -> KernelResult<Self> {
        let data = match super::held_as(fact.dtype) {
            DType::I64 => Data::I64(filled(&fact.shape, 0)?),
            DType::Bool => Data::Bool(filled(&fact.shape, false)?),
            _ => Data::F32(filled(&fact.shape, 0.0)?),
        };
        Ok(Self { shape: fact.shape.clone(), data })
    }

    /// An `f32` tensor of the given shape filled with `value`.
    ///
    /// # Errors
    /// [`KernelError::Value`] when the element count overflows or the memory cannot be had.
    pub fn full(shape: &[usize], value: f32) -> KernelResult<Self> {
        Ok(Self { shape: shape.to_vec(), data: Data::F32(filled(shape, value)?) })
    }

    /// An `f32` tensor from its row-major elements.
    ///
    /// # Errors
    /// [`KernelError::Value`] when `data` does not have exactly as many elements as `shape`.
    pub fn from_f32(shape: &[usize], data: Vec<f32>) -> KernelResult<Self> {
        if numel(shape) != Some(data.len()) {
            return Err(length_error(shape, data.len()));
        }
        Ok(Self { shape: shape.to_vec(), data: Data::F32(data) })
    }

    /// An integer tensor from its row-major elements.
    ///
    /// # Errors
    /// [`KernelError::Value`] when `data` does not have exactly as many elements as `shape`.
    pub fn from_i64(shape: &[usize], data: Vec<i64>) -> KernelResult<Self> {
        if numel(shape) != Some(data.len()) {
            return Err(length_error(shape, data.len()));
        }
        Ok(Self { shape: shape.to_vec(), data: Data::I64(data) })
    }

    /// A bool tensor from its row-major elements.
    ///
    /// # Errors
    /// [`KernelError::Value`] when `data` does not have exactly as many elements as `shape`.
    pub fn from_bool(shape: &[usize], data: Vec<bool>) -> KernelResult<Self> {
        if numel(shape) != Some(data.len()) {
            return Err(length_error(shape, data.len()));
        }
        Ok(Self { shape: shape.to_vec(), data: Data::Bool(data) })
    }

    /// A scalar (rank-0) `f32` tensor.
    pub fn scalar(value: f32) -> Self {
        Self { shape: Vec::new(), data: Data::F32(vec![value]) }
    }

    /// A deterministic pseudo-random tensor of `fact`'s shape from `seed`: floats uniform in
    /// `[-1, 1)`, integers uniform in `[0, 2)` (use [`Tensor::random_ids`] for ids of a larger
    /// range). The same fact and seed give the same tensor on every machine.
    ///
    /// # Errors
    /// As [`Tensor::zeros`].
    pub fn random(fact: &TensorFact, seed: u64) -> KernelResult<Self> {
        let mut t = Self::zeros(fact)?;
        let mut rng = fastrand::Rng::with_seed(seed);
        match &mut t.data {
            Data::F32(v) => v.iter_mut().for_each(|x| *x = rng.f32() * 2.0 - 1.0),
            Data::I64(v) => v.iter_mut().for_each(|x| *x = rng.i64(0..2)),
            Data::Bool(v) => v.iter_mut().for_each(|x| *x = rng.bool()),
        }
        Ok(t)
    }

    /// A deterministic pseudo-random integer tensor of `shape` with values in `[0, bound)`
    /// (`bound` at least 1), e.g. token ids for an embedding of `bound` rows.
    ///
    /// # Errors
    /// [`KernelError::Value`] for a zero bound or an overflowing shape.
    pub fn random_ids(shape: &[usize], bound: usize, seed: u64) -> KernelResult<Self> {
        if bound == 0 {
            return Err(KernelError::Value {
                op: "Tensor".into(),
                message: "random ids need a bound of at least 1".into(),
            });
        }
        let mut ids = filled(shape, 0i64)?;
        let mut rng = fastrand::Rng::with_seed(seed);
        ids.iter_mut().for_each(|x| *x = rng.u64(0..bound as u64) as i64);
        Ok(Self { shape: shape.to_vec(), data: Data::I64(ids) })
    }

    /// The dimensions, outermost first.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The storage's element type: [`DType::F32`], [`DType::I64`] or [`DType::Bool`].
    pub fn dtype(&self) -> DType {
        match self.data {
            Data::F32(_) => DType::F32,
            Data::I64(_) => DType::I64,
            Data::Bool(_) => DType::Bool,
        }
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        match &self.data {
            Data::F32(v) => v.len(),
            Data::I64(v) => v.len(),
            Data::Bool(v) => v.len(),
        }
    }

    /// The tensor's fact: dtype and shape.
    pub fn fact(&self) -> TensorFact {
        TensorFact::new(self.dtype(), self.shape.clone())
    }

    /// The storage.
    pub fn data(&self) -> &Data {
        &self.data
    }

    /// The `f32` elements, `None` for another element type.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match &self.data {
            Data::F32(v) => Some(v),
            _ => None,
        }
    }

    /// The `f32` elements, mutable, `None` for another element type.
    pub fn as_f32_mut(&mut self) -> Option<&mut [f32]> {
        match &mut self.data {
            Data::F32(v) => Some(v),
            _ => None,
        }
    }

    /// The integer elements, mutable; `None` for another element type.
    pub fn as_i64_mut(&mut self) -> Option<&mut [i64]> {
        match &mut self.data {
            Data::I64(v) => Some(v),
            _ => None,
        }
    }

    /// The integer elements, `None` for another element type.
    pub fn as_i64(&self) -> Option<&[i64]> {
        match &self.data {
            Data::I64(v) => Some(v),
            _ => None,
        }
    }

    /// The truth values, `None` for another element type.
    pub fn as_bool(&self) -> Option<&[bool]> {
        match &self.data {
            Data::Bool(v) => Some(v),
            _ => None,
        }
    }

    /// The shape and the storage.
    pub fn into_parts(self) -> (Vec<usize>, Data) {
        (self.shape, self.data)
    }

    /// The same elements under another shape of the same element count.
    ///
    /// # Errors
    /// [`KernelError::Value`] when the element counts differ.
    pub fn reshaped(mut self, shape: &[usize]) -> KernelResult<Self> {
        if numel(shape) != Some(self.numel()) {
            return Err(length_error(shape, self.numel()));
        }
        self.shape = shape.to_vec();
        Ok(self)
    }
}
